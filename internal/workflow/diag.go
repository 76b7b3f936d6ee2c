package workflow

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrInvalid marks every deploy-time error: errors.Is(err, ErrInvalid) holds for
// any error returned by Load.
var ErrInvalid = errors.New("invalid workflow")

// Pos is a 1-based line and column in a workflow source.
type Pos struct {
	Line, Col int
}

// Error is a deploy-time error: a rule of Google's syntax that a source breaks,
// located in the source and shown with the offending line and a caret.
type Error struct {
	File    string
	Pos     Pos
	Msg     string
	Snippet string // the source line at Pos, without its newline
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d:%d: %s", e.File, e.Pos.Line, e.Pos.Col, e.Msg)
	if e.Snippet != "" {
		col := max(e.Pos.Col, 1)
		// Keep tabs so the caret lines up under the offending character.
		pad := strings.Map(func(r rune) rune {
			if r == '\t' {
				return '\t'
			}
			return ' '
		}, e.Snippet[:min(col-1, len(e.Snippet))])
		fmt.Fprintf(&b, "\n    %s\n    %s^", e.Snippet, pad)
	}
	return b.String()
}

func (e *Error) Is(target error) bool { return target == ErrInvalid }

// ErrorList is every deploy-time error of one source, in source order.
type ErrorList []*Error

func (l ErrorList) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

func (l ErrorList) Is(target error) bool { return target == ErrInvalid }

// Unwrap exposes the individual errors to errors.As.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// diag collects located errors for one source.
type diag struct {
	file  string
	lines []string
	errs  ErrorList
}

func newDiag(file string, src []byte) *diag {
	return &diag{file: file, lines: strings.Split(string(src), "\n")}
}

func (d *diag) errorf(p Pos, format string, args ...any) {
	e := &Error{File: d.file, Pos: p, Msg: fmt.Sprintf(format, args...)}
	if p.Line >= 1 && p.Line <= len(d.lines) {
		e.Snippet = strings.TrimRight(d.lines[p.Line-1], "\r")
	}
	d.errs = append(d.errs, e)
}

func (d *diag) err() error {
	if len(d.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(d.errs, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Pos.Line, b.Pos.Line), cmp.Compare(a.Pos.Col, b.Pos.Col))
	})
	return d.errs
}

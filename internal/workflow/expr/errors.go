package expr

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Error tags documented by Google (access-execution-results, error-types). The
// engine raises the HTTP, connection and limit tags itself with NewError.
const (
	TagAuthError                    = "AuthError"
	TagConnectionError              = "ConnectionError"
	TagConnectionFailedError        = "ConnectionFailedError"
	TagHttpError                    = "HttpError"
	TagIndexError                   = "IndexError"
	TagKeyError                     = "KeyError"
	TagOperationError               = "OperationError"
	TagParallelNestingError         = "ParallelNestingError"
	TagRecursionError               = "RecursionError"
	TagResourceLimitError           = "ResourceLimitError"
	TagResponseTypeError            = "ResponseTypeError"
	TagSystemError                  = "SystemError"
	TagTimeoutError                 = "TimeoutError"
	TagTypeError                    = "TypeError"
	TagUnhandledBranchError         = "UnhandledBranchError"
	TagValueError                   = "ValueError"
	TagZeroDivisionError            = "ZeroDivisionError"
	TagMemoryLimitExceededError     = "MemoryLimitExceededError"
	TagResultSizeLimitExceededError = "ResultSizeLimitExceededError"
)

// Error is a Workflows runtime error: what `except: as:` receives and what an
// uncaught error puts in the execution's error payload.
type Error struct {
	// Tags name the error kinds, most specific first (Google's `tags` list).
	Tags []string
	// Message is Google's `message` string.
	Message string
	// Extra holds further keys of the error map, e.g. code, headers and body for
	// an HttpError. It never holds "message" or "tags".
	Extra map[string]any

	// raised is the exact value of a `raise:` step (when isRaised), kept
	// because Google hands a raised string or map to `except: as:` unchanged.
	raised   any
	isRaised bool
	// cause is a sentinel the error also matches with errors.Is.
	cause error
}

// Unwrap exposes the sentinel behind the error, if any (e.g. ErrArgCount).
func (e *Error) Unwrap() error { return e.cause }

// NewError returns an error with one tag and a formatted message.
func NewError(tag, format string, args ...any) *Error {
	return &Error{Tags: []string{tag}, Message: fmt.Sprintf(format, args...)}
}

// KeyError reports a missing map key.
func KeyError(format string, args ...any) *Error { return NewError(TagKeyError, format, args...) }

// IndexError reports a list index out of range.
func IndexError(format string, args ...any) *Error { return NewError(TagIndexError, format, args...) }

// TypeError reports an operand or argument of the wrong type.
func TypeError(format string, args ...any) *Error { return NewError(TagTypeError, format, args...) }

// ValueError reports an argument of the right type but an unacceptable value.
func ValueError(format string, args ...any) *Error { return NewError(TagValueError, format, args...) }

// ZeroDivisionError reports a division or remainder by zero.
func ZeroDivisionError(format string, args ...any) *Error {
	return NewError(TagZeroDivisionError, format, args...)
}

// RecursionError reports a call chain deeper than the documented limit.
func RecursionError(format string, args ...any) *Error {
	return NewError(TagRecursionError, format, args...)
}

// SystemError reports a failure inside the engine itself.
func SystemError(format string, args ...any) *Error {
	return NewError(TagSystemError, format, args...)
}

// Error implements error as "Tag: message".
func (e *Error) Error() string {
	if len(e.Tags) == 0 {
		return e.Message
	}
	return strings.Join(e.Tags, ", ") + ": " + e.Message
}

// HasTag reports whether the error carries tag (the `'X' in e.tags` test).
func (e *Error) HasTag(tag string) bool { return slices.Contains(e.Tags, tag) }

// Map returns Google's error map: {"message": …, "tags": […]} plus Extra.
func (e *Error) Map() map[string]any {
	m := make(map[string]any, len(e.Extra)+2)
	for k, v := range e.Extra {
		m[k] = v
	}
	tags := make([]any, len(e.Tags))
	for i, t := range e.Tags {
		tags[i] = t
	}
	m["tags"] = tags
	m["message"] = e.Message
	return m
}

// Value is what `except: as:` binds: the raised value unchanged for an error
// from a `raise:` step (a string stays a string), the error map otherwise.
func (e *Error) Value() any {
	if e.isRaised {
		return e.raised
	}
	return e.Map()
}

// ErrorFromValue wraps a value raised by a `raise:` step (a string or a map; any
// other value is accepted as Google accepts any expression result). A map's
// "message" and "tags" entries, when they have the documented types, fill
// Message and Tags so that retry predicates and HasTag see them; Value returns
// the raised value itself.
func ErrorFromValue(v any) *Error {
	e := &Error{raised: v, isRaised: true}
	switch x := v.(type) {
	case string:
		e.Message = x
	case map[string]any:
		if msg, ok := x["message"].(string); ok {
			e.Message = msg
		}
		if tags, ok := x["tags"].([]any); ok {
			for _, t := range tags {
				if s, ok := t.(string); ok {
					e.Tags = append(e.Tags, s)
				}
			}
		}
		for k, val := range x {
			if k == "message" || k == "tags" {
				continue
			}
			if e.Extra == nil {
				e.Extra = make(map[string]any)
			}
			e.Extra[k] = val
		}
	default:
		e.Message = Display(v)
	}
	return e
}

// AsError returns err as a Workflows error: the *Error inside it if there is one,
// otherwise a SystemError carrying err's text (a Go error that escaped a function
// is an engine fault, not a user-visible tag).
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return SystemError("%s", err.Error())
}

// SyntaxError is a parse error at a byte offset of the expression text (the text
// inside `${…}`).
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("syntax error at offset %d: %s", e.Offset, e.Msg)
}

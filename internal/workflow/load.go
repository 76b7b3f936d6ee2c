package workflow

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"billrun.dev/billrun/internal/workflow/expr"
)

// Load parses and validates a workflow source (YAML or JSON) the way Google
// does at deploy time. file names the source in errors; the workflow's Name is
// file's base name without its extension. Every problem is reported at once, as
// an ErrorList of located errors (errors.Is(err, ErrInvalid) holds).
func Load(file string, src []byte) (*Workflow, error) {
	d := newDiag(file, src)
	name := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	if len(src) > MaxSourceBytes {
		d.errorf(Pos{1, 1}, "source is %d bytes; the limit is %d", len(src), MaxSourceBytes)
		return nil, d.err()
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		d.errorf(yamlErrPos(err), "not valid YAML: %v", err)
		return nil, d.err()
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		d.errorf(Pos{1, 1}, "empty workflow: expected main or a list of steps")
		return nil, d.err()
	}
	l := &loader{d: d}
	w := &Workflow{Name: name, Routines: l.program(resolveAlias(doc.Content[0])), Source: src}
	validate(d, w)
	if err := d.err(); err != nil {
		return nil, err
	}
	return w, nil
}

// LoadFile reads and loads one workflow file.
func LoadFile(path string) (*Workflow, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load workflow: %w", err)
	}
	return Load(path, src)
}

var yamlLineRe = regexp.MustCompile(`line (\d+)`)

func yamlErrPos(err error) Pos {
	if m := yamlLineRe.FindStringSubmatch(err.Error()); m != nil {
		var line int
		fmt.Sscan(m[1], &line)
		return Pos{line, 1}
	}
	return Pos{1, 1}
}

type loader struct{ d *diag }

// identRe is the form of variable, parameter, step and subworkflow names.
var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (l *loader) program(root *yaml.Node) map[string]*Routine {
	routines := map[string]*Routine{}
	switch root.Kind {
	case yaml.SequenceNode:
		routines["main"] = &Routine{Name: "main", Pos: posOf(root), Steps: l.steps(root)}
	case yaml.MappingNode:
		l.eachKey(root, func(k string, kpos Pos, v *yaml.Node) {
			if !identRe.MatchString(k) {
				l.d.errorf(kpos, "invalid subworkflow name %q", k)
			}
			routines[k] = l.routine(k, kpos, v)
		})
		if _, ok := routines["main"]; !ok {
			l.d.errorf(posOf(root), "missing main workflow")
		}
	default:
		l.d.errorf(posOf(root), "a workflow is a map of subworkflows with main, or a list of steps")
	}
	return routines
}

// eachKey calls f for each key of a mapping, rejecting non-string and
// duplicate keys.
func (l *loader) eachKey(n *yaml.Node, f func(k string, kpos Pos, v *yaml.Node)) {
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := resolveAlias(n.Content[i])
		if k.Kind != yaml.ScalarNode {
			l.d.errorf(posOf(k), "keys must be strings")
			continue
		}
		if seen[k.Value] {
			l.d.errorf(posOf(k), "duplicate key %q", k.Value)
			continue
		}
		seen[k.Value] = true
		f(k.Value, posOf(k), resolveAlias(n.Content[i+1]))
	}
}

// fields reads a mapping whose keys must be among allowed.
func (l *loader) fields(n *yaml.Node, what string, allowed ...string) (map[string]*yaml.Node, map[string]Pos) {
	vals, poss := map[string]*yaml.Node{}, map[string]Pos{}
	if n.Kind != yaml.MappingNode {
		l.d.errorf(posOf(n), "%s must be a map", what)
		return vals, poss
	}
	l.eachKey(n, func(k string, kpos Pos, v *yaml.Node) {
		if !slices.Contains(allowed, k) {
			l.d.errorf(kpos, "unknown key %q in %s (allowed: %s)", k, what, strings.Join(allowed, ", "))
			return
		}
		vals[k], poss[k] = v, kpos
	})
	return vals, poss
}

func (l *loader) routine(name string, pos Pos, n *yaml.Node) *Routine {
	r := &Routine{Name: name, Pos: pos}
	f, _ := l.fields(n, "subworkflow "+name, "params", "steps")
	if p := f["params"]; p != nil {
		r.Params = l.params(name, p)
	}
	if s := f["steps"]; s != nil {
		r.Steps = l.steps(s)
	} else if n.Kind == yaml.MappingNode {
		l.d.errorf(pos, "subworkflow %s has no steps", name)
	}
	return r
}

func (l *loader) params(routine string, n *yaml.Node) []Param {
	if n.Kind != yaml.SequenceNode {
		l.d.errorf(posOf(n), "params must be a list")
		return nil
	}
	if routine == "main" && len(n.Content) > 1 {
		l.d.errorf(posOf(n), "main takes at most one parameter (the execution argument)")
	}
	var ps []Param
	seen := map[string]bool{}
	for _, c := range n.Content {
		c = resolveAlias(c)
		var p Param
		var ppos Pos
		switch {
		case c.Kind == yaml.ScalarNode:
			p.Name, ppos = c.Value, posOf(c)
		case c.Kind == yaml.MappingNode && len(c.Content) == 2:
			p.Name, ppos = c.Content[0].Value, posOf(c.Content[0])
			p.Default = compileValue(l.d, c.Content[1])
		default:
			l.d.errorf(posOf(c), "a parameter is a name or a one-key map name: default")
			continue
		}
		if !identRe.MatchString(p.Name) {
			l.d.errorf(ppos, "invalid parameter name %q", p.Name)
		}
		if seen[p.Name] {
			l.d.errorf(ppos, "duplicate parameter %q", p.Name)
		}
		seen[p.Name] = true
		ps = append(ps, p)
	}
	return ps
}

// oneKeyList is the shape of steps, assign and branches: a non-empty list
// (of at most limit items, when limit > 0) of maps with exactly one key. It
// reports each malformed item and returns the well-formed ones as key/value
// pairs.
type oneKeyList struct {
	empty   string // the error for a missing or empty list
	item    string // the error for an item that is not a one-key map
	limit   int
	tooMany string // format of the error over limit: count, limit
}

func (l *loader) oneKeyItems(n *yaml.Node, shape oneKeyList) [][2]*yaml.Node {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		l.d.errorf(posOf(n), "%s", shape.empty)
		return nil
	}
	if shape.limit > 0 && len(n.Content) > shape.limit {
		l.d.errorf(posOf(n), shape.tooMany, len(n.Content), shape.limit)
	}
	var out [][2]*yaml.Node
	for _, c := range n.Content {
		c = resolveAlias(c)
		if c.Kind != yaml.MappingNode || len(c.Content) != 2 {
			l.d.errorf(posOf(c), "%s", shape.item)
			continue
		}
		out = append(out, [2]*yaml.Node{c.Content[0], c.Content[1]})
	}
	return out
}

func (l *loader) steps(n *yaml.Node) []*Step {
	var out []*Step
	for _, kv := range l.oneKeyItems(n, oneKeyList{
		empty: "steps must be a non-empty list of steps",
		item:  "a step is a map with exactly one key, the step name",
	}) {
		k := kv[0]
		if !identRe.MatchString(k.Value) {
			l.d.errorf(posOf(k), "invalid step name %q", k.Value)
		}
		if s := l.body(k.Value, posOf(k), resolveAlias(kv[1]), stepKeys); s != nil {
			out = append(out, s)
		}
	}
	return out
}

// The keys a step body may have; the first group are the kinds.
var (
	stepKeys      = []string{"assign", "call", "switch", "for", "parallel", "try", "raise", "return", "steps", "args", "result", "next", "retry", "except"}
	conditionKeys = []string{"condition", "assign", "call", "raise", "return", "steps", "args", "result", "next"}
	tryBodyKeys   = []string{"assign", "call", "switch", "for", "parallel", "raise", "return", "steps", "args", "result", "next"}
)

var kindKeys = map[string]StepKind{
	"assign": KindAssign, "call": KindCall, "switch": KindSwitch, "for": KindFor,
	"parallel": KindParallel, "try": KindTry, "raise": KindRaise, "return": KindReturn,
	"steps": KindSteps,
}

// body parses a step body. name is "" for the anonymous bodies of switch
// conditions and try blocks.
func (l *loader) body(name string, pos Pos, n *yaml.Node, allowed []string) *Step {
	what := "step " + name
	if name == "" {
		what = "step body"
	}
	f, fpos := l.fields(n, what, allowed...)
	s := &Step{Name: name, Pos: pos, Kind: KindNext}
	kinds := 0
	for _, k := range allowed {
		if kind, ok := kindKeys[k]; ok && f[k] != nil {
			if kinds > 0 {
				l.d.errorf(fpos[k], "%s has both %s and %s: one step does one thing", what, s.Kind.keyword(), k)
				continue
			}
			kinds++
			s.Kind = kind
		}
	}
	if f["next"] != nil {
		s.Next, s.NextPos = l.str(f["next"], "next"), posOf(f["next"])
		if s.Kind == KindRaise || s.Kind == KindReturn {
			l.d.errorf(fpos["next"], "next cannot follow %s", s.Kind.keyword())
		}
	}
	if kinds == 0 && f["next"] == nil && name != "" && n.Kind == yaml.MappingNode {
		l.d.errorf(pos, "step %s has nothing to do", name)
	}
	for _, k := range []string{"args", "result"} {
		if f[k] != nil && s.Kind != KindCall {
			l.d.errorf(fpos[k], "%s is only allowed with call", k)
		}
	}
	for _, k := range []string{"retry", "except"} {
		if f[k] != nil && s.Kind != KindTry {
			l.d.errorf(fpos[k], "%s is only allowed with try", k)
		}
	}
	switch s.Kind {
	case KindAssign:
		s.Assign = l.assign(f["assign"])
	case KindCall:
		s.Call = l.call(f["call"], f["args"], f["result"])
	case KindSwitch:
		s.Switch = l.switchStep(f["switch"])
	case KindFor:
		s.For = l.forLoop(f["for"])
	case KindParallel:
		s.Parallel = l.parallel(f["parallel"])
	case KindTry:
		s.Try = l.try(f["try"], f["retry"], f["except"])
	case KindRaise:
		s.Raise = compileValue(l.d, f["raise"])
	case KindReturn:
		s.Return = compileValue(l.d, f["return"])
	case KindSteps:
		s.Steps = l.steps(f["steps"])
	}
	return s
}

// keyword is the YAML key of a step kind.
func (k StepKind) keyword() string {
	for kw, kind := range kindKeys {
		if kind == k {
			return kw
		}
	}
	return "next"
}

func (l *loader) str(n *yaml.Node, what string) string {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" && n.Tag != "!!int" && n.Tag != "!!bool" {
		l.d.errorf(posOf(n), "%s must be a string", what)
		return ""
	}
	return n.Value
}

func (l *loader) ident(n *yaml.Node, what string) string {
	s := l.str(n, what)
	if s != "" && !identRe.MatchString(s) {
		l.d.errorf(posOf(n), "%s %q is not a valid name", what, s)
	}
	return s
}

func (l *loader) assign(n *yaml.Node) []*Assignment {
	var out []*Assignment
	for _, kv := range l.oneKeyItems(n, oneKeyList{
		empty:   "assign must be a non-empty list of one-key maps",
		item:    "each assign item is a map with exactly one key",
		limit:   MaxAssignsPerStep,
		tooMany: "assign has %d items; the limit is %d",
	}) {
		k := kv[0]
		t, err := parseTarget(k.Value)
		if err != nil {
			l.d.errorf(posOf(k), "invalid assignment target %q: %v", k.Value, err)
			continue
		}
		out = append(out, &Assignment{Pos: posOf(k), Target: t, Value: compileValue(l.d, kv[1])})
	}
	return out
}

func (l *loader) call(fn, args, result *yaml.Node) *Call {
	c := &Call{Func: l.str(fn, "call"), FuncPos: posOf(fn)}
	if args != nil {
		if args.Kind != yaml.MappingNode {
			l.d.errorf(posOf(args), "args must be a map")
		} else {
			l.eachKey(args, func(k string, kpos Pos, v *yaml.Node) {
				c.Args = append(c.Args, NamedValue{Name: k, Pos: kpos, Value: compileValue(l.d, v)})
			})
		}
	}
	if result != nil {
		c.Result = l.ident(result, "result")
	}
	return c
}

func (l *loader) switchStep(n *yaml.Node) []*Condition {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		l.d.errorf(posOf(n), "switch must be a non-empty list of conditions")
		return nil
	}
	if len(n.Content) > MaxSwitchConditions {
		l.d.errorf(posOf(n), "switch has %d conditions; the limit is %d", len(n.Content), MaxSwitchConditions)
	}
	var out []*Condition
	for _, c := range n.Content {
		c = resolveAlias(c)
		f, _ := l.fields(c, "switch condition", conditionKeys...)
		if f["condition"] == nil {
			if c.Kind == yaml.MappingNode {
				l.d.errorf(posOf(c), "switch item has no condition")
			}
			continue
		}
		cond := &Condition{Pos: posOf(c), Cond: compileValue(l.d, f["condition"])}
		// The body is the same map without its condition key.
		rest := &yaml.Node{Kind: yaml.MappingNode, Line: c.Line, Column: c.Column}
		for i := 0; i+1 < len(c.Content); i += 2 {
			if c.Content[i].Value != "condition" {
				rest.Content = append(rest.Content, c.Content[i], c.Content[i+1])
			}
		}
		cond.Body = l.body("", posOf(c), rest, conditionKeys[1:])
		out = append(out, cond)
	}
	return out
}

func (l *loader) forLoop(n *yaml.Node) *For {
	f, _ := l.fields(n, "for", "value", "index", "in", "range", "steps")
	fl := &For{Pos: posOf(n)}
	if f["value"] == nil {
		l.d.errorf(posOf(n), "for needs value (the loop variable)")
	} else {
		fl.Value = l.ident(f["value"], "value")
	}
	if f["index"] != nil {
		fl.Index = l.ident(f["index"], "index")
	}
	switch {
	case f["in"] != nil && f["range"] != nil:
		l.d.errorf(posOf(f["range"]), "for takes either in or range, not both")
	case f["in"] != nil:
		fl.In = compileValue(l.d, f["in"])
		if lit, ok := fl.In.Literal(); ok {
			if _, isList := lit.([]any); !isList {
				l.d.errorf(fl.In.Pos, "for in must be a list or an expression")
			}
		}
	case f["range"] != nil:
		fl.Range = compileValue(l.d, f["range"])
		if lit, ok := fl.Range.Literal(); ok {
			if r, isList := lit.([]any); !isList || len(r) != 2 {
				l.d.errorf(fl.Range.Pos, "range must be a list of two numbers [start, end]")
			}
		}
	case n.Kind == yaml.MappingNode:
		l.d.errorf(posOf(n), "for needs in or range")
	}
	if f["steps"] != nil {
		fl.Steps = l.steps(f["steps"])
	} else if n.Kind == yaml.MappingNode {
		l.d.errorf(posOf(n), "for needs steps")
	}
	return fl
}

func (l *loader) parallel(n *yaml.Node) *Parallel {
	f, _ := l.fields(n, "parallel", "exception_policy", "shared", "concurrency_limit", "branches", "for")
	p := &Parallel{Pos: posOf(n)}
	if ep := f["exception_policy"]; ep != nil && l.str(ep, "exception_policy") != "continueAll" {
		l.d.errorf(posOf(ep), "exception_policy %q is not supported: continueAll is the only policy", ep.Value)
	}
	if sh := f["shared"]; sh != nil {
		if sh.Kind != yaml.SequenceNode {
			l.d.errorf(posOf(sh), "shared must be a list of variable names")
		} else {
			for _, c := range sh.Content {
				p.Shared = append(p.Shared, l.ident(resolveAlias(c), "shared variable"))
			}
		}
	}
	if cl := f["concurrency_limit"]; cl != nil {
		p.ConcurrencyLimit = compileValue(l.d, cl)
		if lit, ok := p.ConcurrencyLimit.Literal(); ok {
			if i, isInt := lit.(int64); !isInt || i < 1 || i > MaxConcurrency {
				l.d.errorf(posOf(cl), "concurrency_limit must be an integer from 1 to %d", MaxConcurrency)
			}
		}
	}
	switch {
	case f["branches"] != nil && f["for"] != nil:
		l.d.errorf(posOf(f["for"]), "parallel takes either branches or for, not both")
	case f["branches"] != nil:
		p.Branches = l.branches(f["branches"])
	case f["for"] != nil:
		p.For = l.forLoop(f["for"])
	case n.Kind == yaml.MappingNode:
		l.d.errorf(posOf(n), "parallel needs branches or for")
	}
	return p
}

func (l *loader) branches(n *yaml.Node) []*Branch {
	var out []*Branch
	for _, kv := range l.oneKeyItems(n, oneKeyList{
		empty:   "branches must be a non-empty list",
		item:    "a branch is a map with exactly one key, the branch name",
		limit:   MaxBranches,
		tooMany: "parallel has %d branches; the limit is %d",
	}) {
		k := kv[0]
		if !identRe.MatchString(k.Value) {
			l.d.errorf(posOf(k), "invalid branch name %q", k.Value)
		}
		f, _ := l.fields(resolveAlias(kv[1]), "branch "+k.Value, "steps")
		b := &Branch{Name: k.Value, Pos: posOf(k)}
		if f["steps"] == nil {
			l.d.errorf(posOf(k), "branch %s needs steps", k.Value)
		} else {
			b.Steps = l.steps(f["steps"])
		}
		out = append(out, b)
	}
	return out
}

func (l *loader) try(body, retry, except *yaml.Node) *Try {
	t := &Try{Body: l.body("", posOf(body), body, tryBodyKeys)}
	if retry != nil {
		t.Retry = compileValue(l.d, retry)
		if retry.Kind == yaml.MappingNode {
			f, _ := l.fields(retry, "retry", "predicate", "max_retries", "backoff")
			for _, k := range []string{"predicate", "max_retries", "backoff"} {
				if f[k] == nil {
					l.d.errorf(posOf(retry), "retry needs %s (or a whole policy such as ${http.default_retry})", k)
				}
			}
			if b := f["backoff"]; b != nil {
				bf, _ := l.fields(b, "backoff", "initial_delay", "max_delay", "multiplier")
				for _, k := range []string{"initial_delay", "max_delay", "multiplier"} {
					if bf[k] == nil && b.Kind == yaml.MappingNode {
						l.d.errorf(posOf(b), "backoff needs %s", k)
					}
				}
			}
		} else if t.Retry.Expr() == nil {
			l.d.errorf(posOf(retry), "retry must be a policy map or an expression such as ${http.default_retry}")
		}
	}
	if except != nil {
		f, _ := l.fields(except, "except", "as", "steps")
		t.Except = &Except{Pos: posOf(except)}
		if f["as"] != nil {
			t.Except.As = l.ident(f["as"], "as")
		}
		if f["steps"] == nil {
			l.d.errorf(posOf(except), "except needs steps")
		} else {
			t.Except.Steps = l.steps(f["steps"])
		}
	}
	return t
}

// parseTarget parses an assignment target: name, then .key or [expression]
// selectors.
func parseTarget(s string) (*Target, error) {
	t := &Target{Text: s}
	i := 0
	for i < len(s) && (s[i] == '_' || s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z' || i > 0 && s[i] >= '0' && s[i] <= '9') {
		i++
	}
	if i == 0 {
		return nil, fmt.Errorf("it must start with a variable name")
	}
	t.Root = s[:i]
	for i < len(s) {
		switch s[i] {
		case '.':
			j := i + 1
			for j < len(s) && s[j] != '.' && s[j] != '[' {
				j++
			}
			key := s[i+1 : j]
			if !identRe.MatchString(key) {
				return nil, fmt.Errorf("bad key %q after '.'", key)
			}
			t.Path = append(t.Path, &Selector{Key: key})
			i = j
		case '[':
			depth, j := 0, i
			for ; j < len(s); j++ {
				if s[j] == '[' {
					depth++
				} else if s[j] == ']' {
					depth--
					if depth == 0 {
						break
					}
				}
			}
			if j == len(s) {
				return nil, fmt.Errorf("unclosed '['")
			}
			e, err := expr.Parse(s[i+1 : j])
			if err != nil {
				return nil, fmt.Errorf("index does not parse: %v", syntaxMsg(err))
			}
			t.Path = append(t.Path, &Selector{Index: e})
			i = j + 1
		default:
			return nil, fmt.Errorf("unexpected %q", s[i])
		}
	}
	return t, nil
}

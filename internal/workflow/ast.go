package workflow

import "billrun.dev/billrun/internal/workflow/expr"

// Workflow is a loaded and validated workflow source, ready to run. It is
// immutable and may run in many executions at once.
type Workflow struct {
	// Name identifies the workflow (by convention its file name without the
	// extension); it is GOOGLE_CLOUD_WORKFLOW_ID at run time.
	Name string
	// Routines holds "main" and every subworkflow by name.
	Routines map[string]*Routine
	// Source is the text the workflow was loaded from.
	Source []byte
}

// Main is the routine an execution starts in.
func (w *Workflow) Main() *Routine { return w.Routines["main"] }

// Routine is main or a subworkflow.
type Routine struct {
	Name   string
	Pos    Pos
	Params []Param
	Steps  []*Step

	locals map[string]bool // variables of the routine's scope (set by validation)
}

// Param is a routine parameter; Default is nil for a required one.
type Param struct {
	Name    string
	Default *Value
}

// StepKind says which body a step has.
type StepKind int

// The step kinds, one per body key of Google's step syntax; kindNext is a step
// whose only key is next.
const (
	KindNext StepKind = iota
	KindAssign
	KindCall
	KindSwitch
	KindFor
	KindParallel
	KindTry
	KindRaise
	KindReturn
	KindSteps
)

// StepType is the Executions API stepType of s (as in stepEntries).
func (s *Step) StepType() string {
	switch s.Kind {
	case KindAssign:
		return "STEP_ASSIGN"
	case KindCall:
		switch s.Call.kind {
		case callConnector:
			return "STEP_CONNECTOR_CALL"
		case callSubworkflow:
			return "STEP_SUBWORKFLOW_CALL"
		}
		return "STEP_STD_LIB_CALL"
	case KindSwitch:
		return "STEP_SWITCH"
	case KindFor:
		return "STEP_FOR"
	case KindParallel:
		if s.Parallel.For != nil {
			return "STEP_PARALLEL_FOR"
		}
		return "STEP_PARALLEL_BRANCH"
	case KindTry:
		return "STEP_TRY_RETRY_EXCEPT"
	case KindRaise:
		return "STEP_RAISE"
	case KindReturn:
		return "STEP_RETURN"
	case KindNext:
		return "STEP_GOTO"
	}
	return "STEP_TYPE_UNSPECIFIED"
}

// Step is one step. Anonymous steps (Name "") are the bodies of switch
// conditions and of try blocks.
type Step struct {
	Name string
	Pos  Pos
	Kind StepKind

	// Next is the jump after the step: a step name, "end", "break",
	// "continue", or "" to go on with the following step.
	Next    string
	NextPos Pos

	Assign   []*Assignment
	Call     *Call
	Switch   []*Condition
	For      *For
	Parallel *Parallel
	Try      *Try
	Raise    *Value
	Return   *Value
	Steps    []*Step
}

// Assignment is one `target: value` item of an assign step.
type Assignment struct {
	Pos    Pos
	Target *Target
	Value  *Value
}

// Target is an assignment target: a variable and a path of keys or indexes
// into it (`m.k`, `l[0]`, `m[key]`).
type Target struct {
	Text string
	Root string
	Path []*Selector
}

// Selector is one step of a target path: a literal key (`.k`) or an index
// expression (`[i]`).
type Selector struct {
	Key   string
	Index *expr.Expr
}

// Call is a call step: a stdlib function, a connector or a subworkflow.
type Call struct {
	Func    string
	FuncPos Pos
	Args    []NamedValue
	Result  string

	kind callKind // resolved by validation
}

// callKind is what a call step calls.
type callKind int

const (
	callStdlib callKind = iota
	callSubworkflow
	callConnector
)

// NamedValue is one argument of a call step.
type NamedValue struct {
	Name  string
	Pos   Pos
	Value *Value
}

// Condition is one item of a switch: the condition and the body run when it is
// the first true one (an anonymous step: next, steps, or an embedded body).
type Condition struct {
	Pos  Pos
	Cond *Value
	Body *Step
}

// For is a for loop, sequential or the body of a parallel step.
type For struct {
	Pos   Pos
	Value string
	Index string
	In    *Value // a list or map (keys are iterated), or nil with Range
	Range *Value // [start, end], both inclusive
	Steps []*Step

	locals map[string]bool // variables of an iteration's scope (set by validation)
}

// Parallel is a parallel step: branches or a for loop run concurrently.
type Parallel struct {
	Pos              Pos
	Shared           []string
	ConcurrencyLimit *Value
	Branches         []*Branch
	For              *For
}

// Branch is one named branch of a parallel step.
type Branch struct {
	Name  string
	Pos   Pos
	Steps []*Step

	locals map[string]bool // variables of the branch's scope (set by validation)
}

// Try is a try step with its optional retry policy and except block.
type Try struct {
	Body   *Step
	Retry  *Value // a policy map, or an expression evaluating to one
	Except *Except
}

// Except is the error handler of a try step.
type Except struct {
	Pos   Pos
	As    string
	Steps []*Step

	locals map[string]bool // variables of the block's scope (set by validation)
}

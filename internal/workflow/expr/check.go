package expr

import (
	"errors"
	"fmt"
)

// CheckError locates one problem found by Check.
type CheckError struct {
	// Offset is the byte offset of the call in the expression text.
	Offset int
	// Err wraps ErrUnknownFunction, ErrBlockingCall or ErrArgCount.
	Err error
}

func (e *CheckError) Error() string { return fmt.Sprintf("offset %d: %v", e.Offset, e.Err) }

func (e *CheckError) Unwrap() error { return e.Err }

// Check reports the mistakes Google rejects at deploy time in the calls of an
// expression: a function that does not exist, a blocking function called
// inside an expression, and a wrong number of arguments. The result joins one
// *CheckError per problem (nil when there is none), in source order.
func (e *Expr) Check(funcs FuncLookup) error {
	var errs []error
	walk(e.root, func(n node) bool {
		c, ok := n.(*callNode)
		if !ok {
			return true
		}
		f, ok := funcs.Func(c.name)
		switch {
		case !ok:
			errs = append(errs, &CheckError{Offset: c.p, Err: fmt.Errorf("%s: %w", c.name, ErrUnknownFunction)})
		case f.Blocking:
			errs = append(errs, &CheckError{Offset: c.p, Err: fmt.Errorf("%s: %w", c.name, ErrBlockingCall)})
		default:
			if err := f.checkCount(len(c.args)); err != nil {
				errs = append(errs, &CheckError{Offset: c.p, Err: err})
			}
		}
		return true
	})
	return errors.Join(errs...)
}

// walk calls visit on n and, while visit returns true, on the nodes below it:
// parents first, children in source order.
func walk(n node, visit func(node) bool) {
	if !visit(n) {
		return
	}
	switch n := n.(type) {
	case *memberNode:
		walk(n.x, visit)
	case *indexNode:
		walk(n.x, visit)
		walk(n.index, visit)
	case *callNode:
		for _, a := range n.args {
			walk(a, visit)
		}
	case *unaryNode:
		walk(n.x, visit)
	case *binaryNode:
		walk(n.l, visit)
		walk(n.r, visit)
	case *listNode:
		for _, x := range n.elems {
			walk(x, visit)
		}
	case *mapNode:
		for _, x := range n.vals {
			walk(x, visit)
		}
	}
}

package expr_test

import (
	"context"
	"fmt"

	"billrun.dev/billrun/internal/workflow/expr"
)

// The engine's life cycle of an expression: recognise it in a YAML scalar,
// check it at deploy time, evaluate it at run time, and turn a failure into
// the map that `except: as:` receives.
func Example() {
	lib := expr.NewStdlib(expr.StdlibOptions{Env: map[string]string{"GOOGLE_CLOUD_LOCATION": "us-central1"}})

	e, ok, err := expr.ParseValue(`${"charge " + customer.id + " in " + sys.get_env("GOOGLE_CLOUD_LOCATION")}`)
	fmt.Println(ok, err, e.Vars(), e.Calls(), e.Check(lib))

	env := expr.NewEnv(map[string]any{"customer": map[string]any{"id": "cus_1"}}, lib)
	v, err := e.Eval(context.Background(), env)
	fmt.Printf("%q %v\n", v, err)

	bad, _ := expr.Parse("customer.email")
	_, err = bad.Eval(context.Background(), env)
	fmt.Println(expr.AsError(err).Map())
	// Output:
	// true <nil> [customer] [sys.get_env] <nil>
	// "charge cus_1 in us-central1" <nil>
	// map[message:key not found: email tags:[KeyError]]
}

// A call step's named args bind to a function's positions; a blocking
// function is refused inside an expression.
func ExampleFunc_BindNamed() {
	lib := expr.NewStdlib(expr.StdlibOptions{}).Clone()
	log := &expr.Func{
		Name:     "sys.log",
		Blocking: true,
		Params:   []expr.Param{{Name: "text", Optional: true}, {Name: "severity", Optional: true, Default: "DEFAULT"}},
		Call:     func(context.Context, []any) (any, error) { return nil, nil },
	}
	if err := lib.AddFunc(log); err != nil {
		panic(err)
	}
	args, err := log.BindNamed(map[string]any{"text": "hello"})
	fmt.Println(args, err)

	e, _ := expr.Parse(`sys.log("hello")`)
	fmt.Println(e.Check(lib))
	// Output:
	// [hello DEFAULT] <nil>
	// offset 0: sys.log: blocking function called in an expression
}

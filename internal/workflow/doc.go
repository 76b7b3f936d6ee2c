// Package workflow is billrun's local Google Cloud Workflows engine: it runs
// the production YAML on one machine as faithfully as Google's published
// syntax and semantics allow.
//
// It works in stages, each complete before the next starts:
//
//   - Load parses a source keeping YAML positions, then validates everything
//     Google checks at deploy time (keys, step names, jumps, calls, variable
//     scopes, parallel rules, expressions, limits) and reports every problem
//     at once as an ErrorList of located errors with a snippet and a caret.
//   - Engine.Run executes a loaded Workflow: steps, subworkflows, try/retry/
//     except with real (clock-driven) backoff, parallel branches and
//     iterations with shared variables, http.*, sys.log, sys.sleep, the
//     child-execution connector, and the run-time limits. Expressions are the
//     expr subpackage's.
//   - Executions runs executions in the background, keeps their records, step
//     history and logs in a data directory, and reports events; the
//     executionsapi subpackage serves it as Google's Executions API.
//
// Limits are the constants of rules.go; behaviour Google leaves undocumented
// is decided there too, each decision in one place.
//
// A minimal use:
//
//	w, err := workflow.LoadFile("workflows/billing.yaml")
//	eng := workflow.NewEngine(workflow.Options{Env: map[string]string{"URL": u}})
//	result, err := eng.Run(ctx, w, map[string]any{"period": "2026-10"})
//	var re *workflow.RunError
//	if errors.As(err, &re) { /* re.Err.Value() is the error map */ }
package workflow

package workflow

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"billrun.dev/billrun/internal/workflow/expr"
)

// ConnectorRun is the one connector the local engine runs: start a child
// execution and wait for its result.
const ConnectorRun = "googleapis.workflowexecutions.v1.projects.locations.workflows.executions.run"

func isConnector(name string) bool { return strings.HasPrefix(name, "googleapis.") }

// Severities of sys.log [D], and the standard slog level each maps to (the
// record's severity attribute keeps Google's name).
var severities = map[string]slog.Level{
	"DEFAULT": slog.LevelInfo, "DEBUG": slog.LevelDebug, "INFO": slog.LevelInfo,
	"NOTICE": slog.LevelInfo, "WARNING": slog.LevelWarn, "ERROR": slog.LevelError,
	"CRITICAL": slog.LevelError, "ALERT": slog.LevelError, "EMERGENCY": slog.LevelError,
}

// maxSleep is sys.sleep's documented maximum: one year.
const maxSleep = 365 * 24 * time.Hour

// addBlocking registers the functions only call steps may use: http.*,
// sys.log, sys.sleep, sys.sleep_until and the execution connector.
func (e *Engine) addBlocking(r *expr.Registry) {
	e.addHTTP(r)
	opt := func(name string) expr.Param { return expr.Param{Name: name, Optional: true} }
	must(r.AddFunc(&expr.Func{Name: "sys.log", Blocking: true,
		Params: []expr.Param{opt("data"), opt("severity"), opt("text"), opt("json"), opt("timeout")},
		Call:   e.sysLog}))
	must(r.AddFunc(&expr.Func{Name: "sys.sleep", Blocking: true, Params: []expr.Param{{Name: "seconds"}},
		Call: func(ctx context.Context, args []any) (any, error) {
			secs, ok := toFloat(args[0])
			if !ok {
				return nil, expr.TypeError("sys.sleep: seconds must be a number, got %s", expr.TypeName(args[0]))
			}
			d := time.Duration(secs * float64(time.Second))
			if d < 0 || d > maxSleep {
				return nil, expr.ValueError("sys.sleep: seconds must be between 0 and %d", int64(maxSleep.Seconds()))
			}
			return nil, e.opts.Clock.Sleep(ctx, d)
		}}))
	must(r.AddFunc(&expr.Func{Name: "sys.sleep_until", Blocking: true, Params: []expr.Param{{Name: "time"}},
		Call: func(ctx context.Context, args []any) (any, error) {
			s, ok := args[0].(string)
			if !ok {
				return nil, expr.TypeError("sys.sleep_until: time must be a string")
			}
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return nil, expr.ValueError("sys.sleep_until: %v", err)
			}
			d := t.Sub(e.opts.Clock.Now())
			if d > maxSleep {
				return nil, expr.ValueError("sys.sleep_until: more than a year ahead")
			}
			return nil, e.opts.Clock.Sleep(ctx, max(d, 0))
		}}))
	must(r.AddFunc(&expr.Func{Name: ConnectorRun, Blocking: true,
		Params: []expr.Param{{Name: "workflow_id"}, opt("argument"), opt("location"), opt("project_id"), opt("connector_params")},
		Call:   e.runChild}))
}

// sysLog writes a sys.log record to the engine's logger and the execution's
// history. Exactly one of text, json and data is required [D].
func (e *Engine) sysLog(ctx context.Context, args []any) (any, error) {
	data, sevArg, text, js := args[0], args[1], args[2], args[3]
	given := 0
	for _, v := range []any{data, text, js} {
		if v != nil {
			given++
		}
	}
	if given != 1 {
		return nil, expr.ValueError("sys.log: exactly one of text, json and data is required")
	}
	sev := "DEFAULT"
	if sevArg != nil {
		s, ok := sevArg.(string)
		if _, known := severities[s]; !ok || !known {
			return nil, expr.ValueError("sys.log: unknown severity %s", expr.Display(sevArg))
		}
		sev = s
	}
	entry := &LogEntry{Time: e.opts.Clock.Now(), Severity: sev}
	switch {
	case text != nil:
		s, ok := text.(string)
		if !ok {
			return nil, expr.TypeError("sys.log: text must be a string, got %s", expr.TypeName(text))
		}
		entry.Text = s
	case js != nil:
		entry.JSON = js
	default:
		if s, ok := data.(string); ok {
			entry.Text = s
		} else {
			entry.JSON = data
		}
	}
	attrs := []slog.Attr{slog.String("severity", sev)}
	msg := entry.Text
	if entry.JSON != nil {
		b, err := expr.EncodeJSON(entry.JSON)
		if err != nil {
			return nil, expr.TypeError("sys.log: %v", err)
		}
		msg = string(b)
		attrs = append(attrs, slog.Any("json", entry.JSON))
	}
	if fr := frameFrom(ctx); fr != nil {
		entry.Step, _ = ctx.Value(stepKey{}).(string)
		attrs = append(attrs, slog.String("workflow", fr.x.wf.Name), slog.String("execution", fr.x.id),
			slog.String("routine", fr.routine.Name), slog.String("step", entry.Step))
		fr.x.emit(Event{Time: entry.Time, Log: entry})
	}
	e.opts.Logger.LogAttrs(ctx, severities[sev], msg, attrs...)
	return nil, nil
}

// runChild is the execution connector: it runs workflow_id as a child
// execution through Options.Children and returns its result; a failed child
// raises what Children returns (an OperationError, see childFailedMessage).
func (e *Engine) runChild(ctx context.Context, args []any) (any, error) {
	id, ok := args[0].(string)
	if !ok || id == "" {
		return nil, expr.TypeError("%s: workflow_id must be a non-empty string", ConnectorRun)
	}
	if loc, ok := args[2].(string); ok && loc != e.opts.Location {
		return nil, expr.ValueError("%s: location %q is not the local location %q", ConnectorRun, loc, e.opts.Location)
	}
	if p, ok := args[3].(string); ok && p != e.opts.Project {
		return nil, expr.ValueError("%s: project %q is not the local project %q", ConnectorRun, p, e.opts.Project)
	}
	parent := ctx
	if cp := args[4]; cp != nil {
		if _, ok := cp.(map[string]any); !ok {
			return nil, expr.TypeError("%s: connector_params must be a map", ConnectorRun)
		}
		if t, ok := cp.(map[string]any)["timeout"]; ok {
			secs, ok := toFloat(t)
			if !ok || secs <= 0 {
				return nil, expr.TypeError("%s: connector_params.timeout must be a positive number", ConnectorRun)
			}
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(secs*float64(time.Second)))
			defer cancel()
		}
	}
	if e.opts.Children == nil {
		return nil, expr.NewError(expr.TagOperationError, "%s: child executions are not configured in this engine", ConnectorRun)
	}
	res, err := e.opts.Children.RunChild(ctx, id, args[1])
	if errors.Is(err, context.DeadlineExceeded) && parent.Err() == nil {
		return nil, expr.NewError(expr.TagTimeoutError, "%s: child execution of %s timed out", ConnectorRun, id)
	}
	return res, err
}

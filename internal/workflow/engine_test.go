package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

func TestSysLogRecordsAndHistory(t *testing.T) {
	src := `
- hello:
    call: sys.log
    args:
      severity: WARNING
      json: {customer: c1, amount: 100}
- flaky:
    try:
      steps:
        - count:
            assign:
              - n: 1
        - fail:
            raise: {code: 503, tags: [HttpError], message: busy}
    retry: ${http.default_retry}
    except:
      as: e
      steps:
        - note:
            call: sys.log
            args:
              text: '${"gave up: " + e.message}'
`
	w, err := Load("logs.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	eng := NewEngine(Options{Clock: NewManualClock(epoch), Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	var (
		mu     sync.Mutex
		events []Event
	)
	_, err = eng.Execute(context.Background(), w, nil, RunConfig{ExecutionID: "x1", Events: func(ev Event) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}

	// slog records: severity kept, JSON payload as an attribute, located.
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		recs = append(recs, m)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records: %v", len(recs), recs)
	}
	first := recs[0]
	if first["level"] != "WARN" || first["severity"] != "WARNING" || first["execution"] != "x1" ||
		first["step"] != "hello" || first["workflow"] != "logs" || first["msg"] != `{"amount":100,"customer":"c1"}` {
		t.Errorf("first record %v", first)
	}
	if recs[1]["msg"] != "gave up: busy" || recs[1]["severity"] != "DEFAULT" || recs[1]["step"] != "note" {
		t.Errorf("second record %v", recs[1])
	}

	// History: log entries and step entries, with the try step's attempts.
	var logs, steps []string
	for _, ev := range events {
		switch {
		case ev.Log != nil:
			logs = append(logs, ev.Log.Step+":"+ev.Log.Severity)
		case ev.Step != nil:
			s := ev.Step
			steps = append(steps, s.Step+":"+s.State)
			if s.Step == "flaky" && s.Attempts != 6 {
				t.Errorf("flaky attempts %d, want 6 (1 + 5 retries)", s.Attempts)
			}
			if s.Step == "fail" && (s.State != "STATE_FAILED" || s.Error["message"] != "busy") {
				t.Errorf("fail entry %+v", s)
			}
		}
	}
	if got := strings.Join(logs, " "); got != "hello:WARNING note:DEFAULT" {
		t.Errorf("log events %s", got)
	}
	want := "hello:STATE_SUCCEEDED" + strings.Repeat(" count:STATE_SUCCEEDED fail:STATE_FAILED", 6) + " note:STATE_SUCCEEDED flaky:STATE_SUCCEEDED"
	if got := strings.Join(steps, " "); got != want {
		t.Errorf("step events\n got %s\nwant %s", got, want)
	}
}

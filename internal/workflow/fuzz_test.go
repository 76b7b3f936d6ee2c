package workflow

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzLoad feeds the loader and validator arbitrary sources, seeded with every
// golden workflow: Load must return a workflow or located errors, never panic.
func FuzzLoad(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.yaml")
	for _, file := range files {
		if src, err := os.ReadFile(file); err == nil && len(src) <= MaxSourceBytes {
			f.Add(src)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		w, err := Load("fuzz.yaml", src)
		if err == nil && w.Main() == nil {
			t.Fatal("loaded a workflow without main")
		}
	})
}

// FuzzRun runs every source that loads (no network: BASE_URL points nowhere)
// on a manual clock: a run may fail with an error map but never panic or hang.
func FuzzRun(f *testing.F) {
	files, _ := filepath.Glob("testdata/run/*.yaml")
	for _, file := range files {
		if src, err := os.ReadFile(file); err == nil {
			f.Add(src)
		}
	}
	eng := NewEngine(Options{
		Clock:  NewManualClock(epoch),
		Logger: slog.New(slog.DiscardHandler),
		Env:    map[string]string{"BASE_URL": "http://127.0.0.1:1", "DEAD_URL": "http://127.0.0.1:1"},
	})
	f.Fuzz(func(t *testing.T, src []byte) {
		w, err := Load("fuzz.yaml", src)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = eng.Run(ctx, w, nil)
		var re *RunError
		if err != nil && !errors.As(err, &re) {
			t.Fatalf("run ended with %v, want a result or a *RunError", err)
		}
	})
}

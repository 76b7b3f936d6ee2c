package workflow

import (
	"os"
	"path/filepath"
	"testing"
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

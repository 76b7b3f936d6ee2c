package api_test

import (
	"os"
	"testing"

	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/store/firestoredb/emulator"
)

// emulators shares one Firestore emulator among this package's tests; each
// test gets its own empty project.
var emulators emulator.Pool

func TestMain(m *testing.M) {
	code := m.Run()
	emulators.Close()
	os.Exit(code)
}

// extraBackends adds Firestore, through Google's emulator: a test skips when
// the emulator cannot run, or fails when BILLRUN_REQUIRE_EMULATORS=1.
func extraBackends() []backendCase {
	return []backendCase{{"firestore", func(t *testing.T) store.Backend {
		return emulators.Get(t).NewDB(t)
	}}}
}

package firestoredb_test

import (
	"os"
	"testing"

	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/store/firestoredb/emulator"
	"billrun.dev/billrun/internal/store/storetest"
)

var emulators emulator.Pool

func TestMain(m *testing.M) {
	code := m.Run()
	if err := emulators.Close(); err != nil {
		println(err.Error())
	}
	os.Exit(code)
}

func TestContract(t *testing.T) {
	emu := emulators.Get(t)
	storetest.Run(t, func(t *testing.T) store.Backend {
		return emu.NewDB(t)
	})
}

func BenchmarkWrites(b *testing.B) {
	emu := emulators.Get(b)
	storetest.Bench(b, func(b *testing.B) store.Backend {
		return emu.NewDB(b)
	})
}

package api_test

// extraBackends lists stores beyond the embedded one (Firestore, when its
// emulator harness is available).
func extraBackends() []backendCase { return nil }

package vault

import "sync"

// keyLocks queues one proxy instance's transactions on the same budget shard
// (and so on the same key) in memory, instead of letting them contend in the
// store: Firestore resolves such contention by aborting and retrying (its
// emulator only by a lock timeout), which turns a burst into slow 503s. Only
// store transactions hold a lock, never a call to Stripe. Instances of the
// proxy still contend with each other, which the store's transactions resolve.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	mu    sync.Mutex
	users int // holders and waiters; the entry is dropped at zero
}

// lock takes name's lock and returns its release.
func (l *keyLocks) lock(name string) (unlock func()) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*keyLock{}
	}
	k := l.m[name]
	if k == nil {
		k = &keyLock{}
		l.m[name] = k
	}
	k.users++
	l.mu.Unlock()

	k.mu.Lock()
	return func() {
		k.mu.Unlock()
		l.mu.Lock()
		defer l.mu.Unlock()
		if k.users--; k.users == 0 {
			delete(l.m, name)
		}
	}
}

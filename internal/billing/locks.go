package billing

import (
	"context"
	"sync"
)

// keyedLocks serialises work per key within one process: concurrent calls for
// one customer in one instance queue here instead of contending for the same
// record in the store, where transaction retries back off for seconds.
// Instances still exclude each other through the store.
type keyedLocks struct {
	mu   sync.Mutex
	held map[string]chan struct{}
}

// lock waits until key is free or ctx ends, and returns the release function.
func (k *keyedLocks) lock(ctx context.Context, key string) (func(), error) {
	for {
		k.mu.Lock()
		if k.held == nil {
			k.held = map[string]chan struct{}{}
		}
		wait, busy := k.held[key]
		if !busy {
			done := make(chan struct{})
			k.held[key] = done
			k.mu.Unlock()
			return func() {
				k.mu.Lock()
				delete(k.held, key)
				k.mu.Unlock()
				close(done)
			}, nil
		}
		k.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

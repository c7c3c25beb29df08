package replicate

import (
	"context"
	"sync"
)

// keyLocks serializes the copies of each key: one send of a key at a time,
// so that the values of a key reach the replica in the order they were
// written. A key's lock exists only while someone holds or waits for it.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

// keyLock is a mutex that a waiter can give up on: the holder owns the
// channel's one slot.
type keyLock struct {
	ch   chan struct{}
	refs int // holders and waiters, guarded by keyLocks.mu
}

// lock takes key's lock. With wait it waits until the lock is free or ctx is
// done (then it returns ctx's error); without it, it returns a nil lock and
// a nil error at once if the lock is taken.
func (l *keyLocks) lock(ctx context.Context, key string, wait bool) (*keyLock, error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[string]*keyLock)
	}
	kl := l.m[key]
	if kl == nil {
		kl = &keyLock{ch: make(chan struct{}, 1)}
		l.m[key] = kl
	}
	kl.refs++
	l.mu.Unlock()

	select {
	case kl.ch <- struct{}{}:
		return kl, nil
	default:
	}
	var err error
	if wait {
		select {
		case kl.ch <- struct{}{}:
			return kl, nil
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	l.drop(key, kl)
	return nil, err
}

// unlock releases a lock taken by lock.
func (l *keyLocks) unlock(key string, kl *keyLock) {
	<-kl.ch
	l.drop(key, kl)
}

func (l *keyLocks) drop(key string, kl *keyLock) {
	l.mu.Lock()
	kl.refs--
	if kl.refs == 0 {
		delete(l.m, key)
	}
	l.mu.Unlock()
}

// Package keyed keeps the breakers that an integration (httpbreaker,
// grpcbreaker) registers on first use, one per key (an upstream host, a gRPC
// target), and bounds them: a breaker no call went through for an idle
// time is removed from its manager, and before a new one would exceed a
// cap, the least recently used are, closed ones first. It runs no goroutine
// of its own: the calls do the work, a new key's under the lock that
// serializes registrations, an idle sweep by the call that finds it due.
package keyed

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
)

// Defaults of the bounds.
const (
	DefaultMax  = 1000
	DefaultIdle = 10 * time.Minute
)

// Entry is one key's breaker.
type Entry[T any] struct {
	// Breaker is the key's breaker.
	Breaker *manager.Breaker
	// Owned is set when the integration registered Breaker itself: only
	// such a breaker is removed from the manager when it goes.
	Owned bool
	// Extra is what the integration keeps with the breaker.
	Extra T

	last atomic.Int64 // the last use, in Unix nanoseconds on the manager's clock
}

// Register registers the breaker of a new key, or finds the one registered
// under its name by someone else, and returns it, whether it registered it
// itself, and the integration's data of it.
type Register[T any] func(key string) (b *manager.Breaker, owned bool, extra T, err error)

// Set is the bounded breakers of one integration value. It is safe for
// concurrent use.
type Set[T any] struct {
	m        *manager.Manager
	clk      clock.Clock
	register Register[T]
	max      int   // the most entries kept; 0: no cap
	idle     int64 // nanoseconds unused before an entry goes; 0: never
	grain    int64 // how stale an entry's last use may be: its resolution

	cache     sync.Map   // key -> *Entry[T]
	mu        sync.Mutex // held to add or drop entries
	count     int        // entries in the cache; guarded by mu
	nextSweep atomic.Int64
}

// New returns a Set of breakers of m, registered by register. limit caps
// how many it keeps and idle is how long an unused one is kept, as an
// integration's options give them: zero means DefaultMax or DefaultIdle, a
// negative value no cap or no idle removal.
func New[T any](m *manager.Manager, limit int, idle time.Duration, register Register[T]) *Set[T] {
	s := &Set[T]{m: m, clk: m.Clock(), register: register}
	switch {
	case limit == 0:
		s.max = DefaultMax
	case limit > 0:
		s.max = limit
	}
	switch {
	case idle == 0:
		s.idle = int64(DefaultIdle)
	case idle > 0:
		s.idle = int64(idle)
	}
	s.grain = int64(time.Second)
	if s.idle > 0 {
		s.grain = min(s.grain, s.idle/8)
	}
	return s
}

// tracks reports whether the set keeps track of its breakers' use.
func (s *Set[T]) tracks() bool { return s.max > 0 || s.idle > 0 }

// touch records a use of e at now (Unix nanoseconds on the manager's
// clock). It writes only when the last use recorded is more than the
// resolution old, so that the calls of a busy upstream do not all write the
// same word.
func (e *Entry[T]) touch(now, grain int64) {
	if now-e.last.Load() >= grain {
		e.last.Store(now)
	}
}

// Acquire asks the breaker of key for a permit, registering the breaker
// first if the key is new. A breaker removed since it was found (by the
// bounds, or by hand with Manager.Remove) is forgotten, and the call goes
// through a fresh one. The entry is returned with Acquire's error too,
// unless the registration failed.
func (s *Set[T]) Acquire(ctx context.Context, key string) (*Entry[T], manager.Permit, error) {
	for tries := 0; ; tries++ {
		e, err := s.entry(key)
		if err != nil {
			return nil, manager.Permit{}, err
		}
		p, err := e.Breaker.Acquire(ctx)
		if errors.Is(err, manager.ErrRemoved) && tries < 3 {
			s.forget(key, e)
			continue
		}
		return e, p, err
	}
}

// entry returns the registered breaker of key.
func (s *Set[T]) entry(key string) (*Entry[T], error) {
	var now int64
	if s.tracks() {
		now = s.clk.Now().UnixNano()
	}
	if v, ok := s.cache.Load(key); ok {
		e := v.(*Entry[T])
		if s.tracks() {
			e.touch(now, s.grain)
			s.maybeSweep(now)
		}
		return e, nil
	}
	return s.add(key, now)
}

// add registers the breaker of a new key, after making room for it. A
// registration that fails leaves nothing behind, so that a later call tries
// again.
func (s *Set[T]) add(key string, now int64) (*Entry[T], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.cache.Load(key); ok { // registered while this one waited
		return v.(*Entry[T]), nil
	}
	s.sweepLocked(now)
	if s.max > 0 && s.count >= s.max {
		s.evictLocked()
	}
	b, owned, extra, err := s.register(key)
	if err != nil {
		return nil, err
	}
	e := &Entry[T]{Breaker: b, Owned: owned, Extra: extra}
	e.last.Store(now)
	s.cache.Store(key, e)
	s.count++
	return e, nil
}

// maybeSweep removes the idle breakers if a sweep is due and no other call
// is adding or sweeping.
func (s *Set[T]) maybeSweep(now int64) {
	if s.idle == 0 || now < s.nextSweep.Load() || !s.mu.TryLock() {
		return
	}
	defer s.mu.Unlock()
	s.sweepLocked(now)
}

// sweepLocked removes every breaker unused for the idle time, if a sweep is
// due. Sweeps are half an idle time apart, so a breaker goes between one
// and one and a half idle times after its last use, provided calls keep
// coming.
func (s *Set[T]) sweepLocked(now int64) {
	if s.idle == 0 || now < s.nextSweep.Load() {
		return
	}
	s.nextSweep.Store(now + s.idle/2)
	s.cache.Range(func(k, v any) bool {
		if e := v.(*Entry[T]); now-e.last.Load() >= s.idle {
			s.dropLocked(k.(string), e)
		}
		return true
	})
}

// evictLocked makes room under the cap: it removes the least recently used
// breakers, closed ones before the others, down to a sixteenth of the cap
// below it, so that the next registrations need not evict again. An open
// breaker of an upstream that still gets calls goes last: removing it would
// let every call through to the upstream it protects.
func (s *Set[T]) evictLocked() {
	type candidate struct {
		key  string
		e    *Entry[T]
		open bool
		last int64
	}
	all := make([]candidate, 0, s.count)
	s.cache.Range(func(k, v any) bool {
		e := v.(*Entry[T])
		all = append(all, candidate{k.(string), e, e.Breaker.State() != breaker.Closed, e.last.Load()})
		return true
	})
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].open != all[j].open {
			return !all[i].open
		}
		return all[i].last < all[j].last
	})
	keep := max(s.max-s.max/16-1, 0)
	for _, c := range all[:max(len(all)-keep, 0)] {
		s.dropLocked(c.key, c.e)
	}
}

// forget drops e, whose breaker was removed, from the cache.
func (s *Set[T]) forget(key string, e *Entry[T]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache.CompareAndDelete(key, e) {
		s.count--
	}
}

// dropLocked drops e from the cache and removes its breaker from the
// manager if the integration registered it and it is still the one
// registered under key. A breaker found registered (by hand, or by another
// integration value) is only forgotten.
func (s *Set[T]) dropLocked(key string, e *Entry[T]) {
	if !s.cache.CompareAndDelete(key, e) {
		return
	}
	s.count--
	if b, ok := s.m.Breaker(key); e.Owned && ok && b == e.Breaker {
		s.m.Remove(key)
	}
}

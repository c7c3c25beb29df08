package httpbreaker

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
)

// Defaults of the bounds on a Transport's breakers.
const (
	// DefaultMaxBreakers is how many breakers a Transport keeps when
	// Options.MaxBreakers is zero.
	DefaultMaxBreakers = 1000
	// DefaultIdleTimeout is how long a breaker no request went through is
	// kept when Options.IdleTimeout is zero.
	DefaultIdleTimeout = 10 * time.Minute
)

// hosts bounds the breakers of a Transport: those no request went through
// for the idle time are removed, and before a new one would exceed the cap,
// the least recently used are, closed ones first. It runs no goroutine of
// its own: the requests do the work, a new key's under the lock that
// serializes registrations, an idle sweep by the request that finds it due.
type hosts struct {
	max   int   // the most entries kept; 0: no cap
	idle  int64 // nanoseconds unused before an entry goes; 0: never
	grain int64 // how stale an entry's last use may be: its resolution

	mu        sync.Mutex // held to add or drop entries
	count     int        // entries in the cache; guarded by mu
	nextSweep atomic.Int64
}

// init sets the bounds from the options.
func (h *hosts) init(opts Options) {
	switch {
	case opts.MaxBreakers == 0:
		h.max = DefaultMaxBreakers
	case opts.MaxBreakers > 0:
		h.max = opts.MaxBreakers
	}
	switch {
	case opts.IdleTimeout == 0:
		h.idle = int64(DefaultIdleTimeout)
	case opts.IdleTimeout > 0:
		h.idle = int64(opts.IdleTimeout)
	}
	h.grain = int64(time.Second)
	if h.idle > 0 {
		h.grain = min(h.grain, h.idle/8)
	}
}

// tracks reports whether the Transport keeps track of its breakers' use.
func (h *hosts) tracks() bool { return h.max > 0 || h.idle > 0 }

// touch records a use of e at now (Unix nanoseconds on the manager's
// clock). It writes only when the last use recorded is more than the
// resolution old, so that the requests of a busy upstream do not all write
// the same word.
func (e *entry) touch(now, grain int64) {
	if now-e.last.Load() >= grain {
		e.last.Store(now)
	}
}

// acquire asks the breaker of req's key for a permit, registering the
// breaker first if the key is new. A breaker removed since it was found (by
// the bounds, or by hand with Manager.Remove) is forgotten, and the request
// goes through a fresh one.
func (t *Transport) acquire(req *http.Request) (*entry, manager.Permit, error) {
	key := t.key(req)
	if key == "" {
		return nil, manager.Permit{}, fmt.Errorf("fusebox: httpbreaker: the key function returned an empty key for %s", describe(req))
	}
	for tries := 0; ; tries++ {
		e, err := t.entry(key)
		if err != nil {
			return nil, manager.Permit{}, err
		}
		p, err := e.b.Acquire(req.Context())
		if errors.Is(err, manager.ErrRemoved) && tries < 3 {
			t.forget(key, e)
			continue
		}
		return e, p, err
	}
}

// entry returns the registered breaker of key.
func (t *Transport) entry(key string) (*entry, error) {
	var now int64
	if t.hosts.tracks() {
		now = t.clk.Now().UnixNano()
	}
	if v, ok := t.cache.Load(key); ok {
		e := v.(*entry)
		if t.hosts.tracks() {
			e.touch(now, t.hosts.grain)
			t.maybeSweep(now)
		}
		return e, nil
	}
	return t.add(key, now)
}

// add registers the breaker of a new key, after making room for it. A
// registration that fails leaves nothing behind, so that a later request
// tries again.
func (t *Transport) add(key string, now int64) (*entry, error) {
	h := &t.hosts
	h.mu.Lock()
	defer h.mu.Unlock()
	if v, ok := t.cache.Load(key); ok { // registered while this one waited
		return v.(*entry), nil
	}
	t.sweepLocked(now)
	if h.max > 0 && h.count >= h.max {
		t.evictLocked()
	}
	e := new(entry)
	t.register(key, e)
	if e.err != nil {
		return nil, e.err
	}
	e.last.Store(now)
	t.cache.Store(key, e)
	h.count++
	return e, nil
}

// maybeSweep removes the idle breakers if a sweep is due and no other
// request is adding or sweeping.
func (t *Transport) maybeSweep(now int64) {
	h := &t.hosts
	if h.idle == 0 || now < h.nextSweep.Load() || !h.mu.TryLock() {
		return
	}
	defer h.mu.Unlock()
	t.sweepLocked(now)
}

// sweepLocked removes every breaker unused for the idle time, if a sweep is
// due. Sweeps are half an idle time apart, so a breaker goes between one
// and one and a half idle times after its last use, provided requests keep
// coming.
func (t *Transport) sweepLocked(now int64) {
	h := &t.hosts
	if h.idle == 0 || now < h.nextSweep.Load() {
		return
	}
	h.nextSweep.Store(now + h.idle/2)
	t.cache.Range(func(k, v any) bool {
		if e := v.(*entry); now-e.last.Load() >= h.idle {
			t.dropLocked(k.(string), e)
		}
		return true
	})
}

// evictLocked makes room under the cap: it removes the least recently used
// breakers, closed ones before the others, down to a sixteenth of the cap
// below it, so that the next registrations need not evict again. An open
// breaker of an upstream that still gets requests goes last: removing it
// would let every request through to the upstream it protects.
func (t *Transport) evictLocked() {
	h := &t.hosts
	type candidate struct {
		key  string
		e    *entry
		open bool
		last int64
	}
	all := make([]candidate, 0, h.count)
	t.cache.Range(func(k, v any) bool {
		e := v.(*entry)
		all = append(all, candidate{k.(string), e, e.b.State() != breaker.Closed, e.last.Load()})
		return true
	})
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].open != all[j].open {
			return !all[i].open
		}
		return all[i].last < all[j].last
	})
	keep := max(h.max-h.max/16-1, 0)
	for _, c := range all[:max(len(all)-keep, 0)] {
		t.dropLocked(c.key, c.e)
	}
}

// forget drops e, whose breaker was removed, from the cache.
func (t *Transport) forget(key string, e *entry) {
	t.hosts.mu.Lock()
	defer t.hosts.mu.Unlock()
	if t.cache.CompareAndDelete(key, e) {
		t.hosts.count--
	}
}

// dropLocked drops e from the cache and removes its breaker from the
// manager if this Transport registered it and it is still the one
// registered under key. A breaker found registered (by hand, or by another
// Transport) is only forgotten.
func (t *Transport) dropLocked(key string, e *entry) {
	if !t.cache.CompareAndDelete(key, e) {
		return
	}
	t.hosts.count--
	if b, ok := t.m.Breaker(key); e.owned && ok && b == e.b {
		t.m.Remove(key)
	}
}

package manager

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// GroupOptions bound the breakers of a Group.
type GroupOptions struct {
	// Max is the most breakers the group holds at once. When it holds
	// Max and a new key comes, the group first forgets the breakers it
	// may forget (see IdleTTL); if none may go, Get of the new key fails
	// with an error that matches ErrGroupFull, and the breakers it holds
	// keep their counts. Zero means no bound; a negative value is an
	// error.
	Max int
	// IdleTTL is how long a breaker must go without a Get, closed and
	// with no failure counted, before the group may forget it. Zero means
	// 10 minutes; a negative value is an error.
	IdleTTL time.Duration
}

// defaultIdleTTL is GroupOptions.IdleTTL when it is zero.
const defaultIdleTTL = 10 * time.Minute

// ErrGroupFull is matched, with errors.Is, by the error Group.Get returns
// for a new key while the group holds GroupOptions.Max breakers and none of
// them may be forgotten: each is open, half open, probing, in a slow start,
// forced, counting failures, or was used within GroupOptions.IdleTTL. The
// group refuses the key rather than forget a breaker that knows something:
// a flood of new keys cannot wipe a failing key's count. The error names
// the group and the key; a later Get of the key may succeed once a breaker
// has been idle and closed for IdleTTL.
var ErrGroupFull = errors.New("fusebox: group full: no breaker of it is idle and closed")

// Group is a set of breakers of one Config, one per key (a tenant, a host,
// a shard), made on first use: Get(key) returns the breaker named
// name+"/"+key, registered with the manager the first time the key comes.
// The group forgets a breaker (Manager.Remove) only when it is idle and
// closed: no Get of its key for GroupOptions.IdleTTL, closed at full rate,
// not forced, and with no failure counted in its closed period. An open,
// half-open, probing, slow-starting or forced breaker, or one counting
// failures, is kept however many other keys come. A breaker that is
// forgotten loses nothing a fresh one would not know; the key's next Get
// registers a fresh one.
//
// The group does its work on the goroutines that call Get: a new key's
// registration and, when the group is full or a sweep of idle breakers is
// due, the sweep, under a lock that serializes them. A Get of a key that
// exists takes no lock. It is safe for concurrent use.
//
// Get again for each call rather than keeping the breaker for long: a
// breaker kept past IdleTTL without a Get may have been forgotten, and its
// calls then get ErrRemoved.
type Group struct {
	m      *Manager
	name   string
	prefix string // name + "/"
	cfg    Config // validated, its defaults filled in
	// defaultClassify says that the Config's Classify was nil.
	defaultClassify bool
	max             int
	ttl             int64 // IdleTTL in nanoseconds
	grain           int64 // how stale a member's last use may be: its resolution

	// size counts the group's breakers that the manager holds: one
	// more at each add, one less as the manager forgets one (forget),
	// whether the group evicted it or Manager.Remove removed it.
	size atomic.Int64
	// sweepAt is when an idle sweep is due, on Manager.elapsed.
	sweepAt atomic.Int64

	mu sync.Mutex // held to add breakers and to sweep
	// list, guarded by mu, holds the group's breakers for its sweeps; one
	// removed by hand stays in it until the next sweep. A key's breaker
	// is found in the manager's registry, by its name: the group keeps
	// no map of its own, and a breaker costs it one pointer here and
	// two words in the Breaker (owner, used).
	list []*Breaker
	// fullUntil, guarded by mu, is when a group that found nothing to
	// forget while full looks again: until then a new key is refused at
	// once, rather than after a scan of every breaker.
	fullUntil int64
}

// evicting, in a Breaker's used, marks a breaker the group is
// forgetting: a Get that finds it waits for the group's lock and makes a
// fresh breaker.
const evicting = math.MinInt64

// Group returns a group of breakers of cfg, named name+"/"+key for each
// key (see Group). cfg is validated once, here, as Register validates it;
// the error names the group and the field at fault. A name already given
// to a group of the manager is an error that matches ErrDuplicate, as is a
// negative GroupOptions.Max or IdleTTL an error naming the field.
func (m *Manager) Group(name string, cfg Config, opts GroupOptions) (*Group, error) {
	if !m.made() {
		return nil, groupError(name, errNotStarted)
	}
	if opts.Max < 0 {
		return nil, groupError(name, fmt.Errorf("GroupOptions.Max must not be negative, got %d", opts.Max))
	}
	if opts.IdleTTL < 0 {
		return nil, groupError(name, fmt.Errorf("GroupOptions.IdleTTL must not be negative, got %v", opts.IdleTTL))
	}
	// The group's name is checked as its breakers' names would be.
	if name == "" {
		return nil, groupError(name, errors.New("the name must not be empty"))
	}
	if err := checkName(name + "/k"); err != nil {
		return nil, groupError(name, err)
	}
	custom := cfg.Classify
	cfg, err := validateConfig(opGroup, name, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := initPolicy(cfg.Recover); err != nil {
		return nil, configError(opGroup, name, "Recover", err)
	}
	g := &Group{
		m:               m,
		name:            name,
		prefix:          name + "/",
		cfg:             cfg,
		defaultClassify: custom == nil,
		max:             opts.Max,
		ttl:             int64(opts.IdleTTL),
	}
	if g.ttl == 0 {
		g.ttl = int64(defaultIdleTTL)
	}
	g.grain = min(int64(time.Second), g.ttl/8)
	g.sweepAt.Store(g.now() + g.ttl/2)
	m.groupsMu.Lock()
	defer m.groupsMu.Unlock()
	if m.groups[name] {
		return nil, groupError(name, ErrDuplicate)
	}
	if m.groups == nil {
		m.groups = make(map[string]bool)
	}
	m.groups[name] = true
	return g, nil
}

// groupError is an error of the group named name.
func groupError(name string, err error) error {
	return fmt.Errorf("fusebox: group %q: %w", name, err)
}

// Len returns how many breakers the group holds.
func (g *Group) Len() int { return int(g.size.Load()) }

func (g *Group) now() int64 { return int64(g.m.elapsed()) }

// Get returns the breaker of key, named name+"/"+key, registering it with
// the group's Config if the key is new (or its breaker was forgotten, or
// removed by hand with Manager.Remove). It fails, with an error that names
// the group and the key, if the key is empty or makes a name no breaker
// may have (see Register), if that name is registered outside the group
// (errors.Is(err, ErrDuplicate)), if the group is full and none of its
// breakers may be forgotten (errors.Is(err, ErrGroupFull)), or if the
// manager has stopped (errors.Is(err, ErrStopped)). A Get of a key that
// exists reads the clock once, looks the name up as Manager.Breaker does
// and allocates nothing.
func (g *Group) Get(key string) (*Breaker, error) {
	now := g.now()
	if b := g.lookup(key); b != nil && g.touch(b, now) {
		if now >= g.sweepAt.Load() {
			g.trySweep(now)
		}
		return b, nil
	}
	return g.add(key, now)
}

// lookup returns the breaker registered under the name of key, or nil. It
// builds the name on the stack: a map lookup by string(bytes) allocates
// nothing.
func (g *Group) lookup(key string) *Breaker {
	var buf [maxNameLen]byte
	if len(g.prefix)+len(key) > len(buf) {
		return nil
	}
	name := append(append(buf[:0], g.prefix...), key...)
	g.m.mu.RLock()
	b := g.m.byName[string(name)]
	g.m.mu.RUnlock()
	return b
}

// touch records a Get of b at now, and reports false if b is not the
// group's live breaker: another's (a name registered by hand), removed,
// or being forgotten. It writes only when the last Get recorded is more
// than the resolution old, so that the Gets of a busy key do not all
// write one word; a breaker old enough to be forgotten is always written,
// with a compare-and-swap that the group's own (to evicting) excludes.
func (g *Group) touch(b *Breaker, now int64) bool {
	if b.owner != g {
		return false
	}
	for {
		last := b.used.Load()
		switch {
		case last == evicting:
			return false
		case now-last < g.grain:
			return !b.mach.Snapshot().Removed
		case b.used.CompareAndSwap(last, now):
			return !b.mach.Snapshot().Removed
		}
	}
}

// add registers the breaker of key, a key the group holds no live breaker
// of, after making room for it.
func (g *Group) add(key string, now int64) (*Breaker, error) {
	if key == "" {
		return nil, g.keyError(key, errors.New("the key must not be empty"))
	}
	name := g.prefix + key
	if err := checkName(name); err != nil {
		return nil, g.keyError(key, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if b := g.lookup(key); b != nil && g.touch(b, now) {
		return b, nil // added while this one waited
	}
	if now >= g.sweepAt.Load() {
		g.sweepLocked(now)
	}
	if g.max > 0 && int(g.size.Load()) >= g.max {
		if now >= g.fullUntil {
			g.sweepLocked(now)
		}
		if int(g.size.Load()) >= g.max {
			g.fullUntil = now + g.grain
			return nil, g.keyError(key, fmt.Errorf("%w: it holds GroupOptions.Max (%d) breakers, each open, probing, slow-starting, forced, counting failures or used within GroupOptions.IdleTTL (%v)",
				ErrGroupFull, g.max, time.Duration(g.ttl)))
		}
	}
	g.size.Add(1) // before the manager could forget it
	b, err := g.m.registerValid(name, g.cfg, g.defaultClassify, initPending{}, func(b *Breaker) {
		b.owner = g
		b.used.Store(now)
	})
	if err != nil {
		g.size.Add(-1)
		return nil, g.keyError(key, err)
	}
	g.list = append(g.list, b)
	return b, nil
}

func (g *Group) keyError(key string, err error) error {
	return fmt.Errorf("fusebox: group %q: key %q: %w", g.name, key, err)
}

// trySweep sweeps the group if no other Get is adding or sweeping.
func (g *Group) trySweep(now int64) {
	if !g.mu.TryLock() {
		return
	}
	defer g.mu.Unlock()
	if now >= g.sweepAt.Load() {
		g.sweepLocked(now)
	}
}

// sweepLocked forgets every breaker that is idle and closed, and drops
// from the list those removed by hand. Sweeps due by the clock are half an
// IdleTTL apart, so an idle breaker goes between one and one and a half
// IdleTTL after its last Get, provided Gets keep coming; a full group
// sweeps before it adds.
func (g *Group) sweepLocked(now int64) {
	g.sweepAt.Store(now + g.ttl/2)
	wall := g.m.clk.Now() // for counters with a time window
	var gone []*Breaker
	kept := g.list[:0]
	for _, b := range g.list {
		if g.evict(b, now, wall) {
			gone = append(gone, b)
		} else if !b.mach.Snapshot().Removed {
			kept = append(kept, b)
		}
	}
	clear(g.list[len(kept):])
	g.list = kept
	if cap(g.list) > 1024 && len(g.list) < cap(g.list)/4 {
		g.list = append([]*Breaker(nil), g.list...)
	}
	g.m.removeAll(gone) // the manager's forget counts them out of size
}

// evict marks b as being forgotten, if it is idle and closed, and
// reports whether it did.
func (g *Group) evict(b *Breaker, now int64, wall time.Time) bool {
	last := b.used.Load()
	if last == evicting || now-last < g.ttl || !b.mach.Quiet(wall) {
		return false
	}
	if !b.used.CompareAndSwap(last, evicting) {
		return false // got since it was read
	}
	// A caller that kept the breaker past IdleTTL may have counted a
	// failure since the check: look again, now that no Get can hand it
	// out.
	if !b.mach.Quiet(wall) {
		b.used.Store(last)
		return false
	}
	return true
}

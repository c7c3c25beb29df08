package manager_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// groupConfig trips on the 5th failure in a row and stays open an hour.
var groupConfig = manager.Config{
	Strategy: breaker.Consecutive{Failures: 5},
	Recover:  recover.BasicTimeout{Open: time.Hour},
}

func newGroup(t testing.TB, m *manager.Manager, name string, cfg manager.Config, opts manager.GroupOptions) *manager.Group {
	t.Helper()
	g, err := m.Group(name, cfg, opts)
	require.NoError(t, err, "Group(%q, %+v)", name, opts)
	return g
}

func get(t testing.TB, g *manager.Group, key string) *manager.Breaker {
	t.Helper()
	b, err := g.Get(key)
	require.NoError(t, err, "Get(%q)", key)
	return b
}

func TestGroupMakesABreakerPerKeyOnFirstUse(t *testing.T) {
	m, _ := startMock(t)
	g := newGroup(t, m, "tenants", groupConfig, manager.GroupOptions{})
	assert.Equal(t, 0, g.Len())

	a := get(t, g, "acme")
	assert.Equal(t, "tenants/acme", a.Name())
	assert.Same(t, a, get(t, g, "acme"), "a second Get of the key")
	found, ok := m.Breaker("tenants/acme")
	require.True(t, ok, "the breaker is registered with the manager")
	assert.Same(t, a, found)
	get(t, g, "globex")
	assert.Equal(t, 2, g.Len())

	fail(t, a, 5)
	requireState(t, a, breaker.Open, "five failures through the group's Config")

	// Removed by hand: the next Get makes a fresh breaker.
	require.True(t, m.Remove("tenants/globex"))
	fresh := get(t, g, "globex")
	assert.Equal(t, breaker.Closed, fresh.State())
	assert.Equal(t, 2, g.Len())
}

func TestGroupRefusesBadInput(t *testing.T) {
	m, _ := startMock(t)
	newGroup(t, m, "taken", groupConfig, manager.GroupOptions{})
	_, err := m.Register("hosts/by-hand", manager.Config{})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		cfg  manager.Config
		opts manager.GroupOptions
		want []string
	}{
		{"neg", groupConfig, manager.GroupOptions{Max: -1}, []string{`group "neg"`, "GroupOptions.Max", "-1"}},
		{"ttl", groupConfig, manager.GroupOptions{IdleTTL: -time.Second}, []string{`group "ttl"`, "GroupOptions.IdleTTL"}},
		{"", groupConfig, manager.GroupOptions{}, []string{`group ""`, "empty"}},
		{"bad\nname", groupConfig, manager.GroupOptions{}, []string{"not printable"}},
		{"strategy", manager.Config{Strategy: breaker.Consecutive{}}, manager.GroupOptions{}, []string{`group "strategy"`, "Config.Strategy", "Failures"}},
		{"recover", manager.Config{Recover: recover.Exponential{Initial: -1}}, manager.GroupOptions{}, []string{`group "recover"`, "Config.Recover"}},
		{"taken", groupConfig, manager.GroupOptions{}, []string{`group "taken"`, "already registered"}},
	} {
		_, err := m.Group(tc.name, tc.cfg, tc.opts)
		require.Error(t, err, "Group(%q, %+v)", tc.name, tc.opts)
		for _, w := range tc.want {
			assert.Contains(t, err.Error(), w, "Group(%q, %+v)", tc.name, tc.opts)
		}
	}

	g := newGroup(t, m, "hosts", groupConfig, manager.GroupOptions{})
	for _, tc := range []struct {
		key  string
		want string
	}{
		{"", "empty"},
		{"a\tb", "not printable"},
		{strings.Repeat("x", 300), "more than 256"},
		{"by-hand", "already registered"},
	} {
		_, err := g.Get(tc.key)
		require.Error(t, err, "Get(%q)", tc.key)
		assert.Contains(t, err.Error(), `group "hosts"`, "Get(%q)", tc.key)
		assert.Contains(t, err.Error(), tc.want, "Get(%q)", tc.key)
	}
	assert.Equal(t, 0, g.Len(), "a refused key holds nothing")
}

// The group forgets a breaker only once it is idle and closed: every
// other kind of breaker outlives any number of sweeps.
func TestGroupForgetsOnlyIdleClosedBreakers(t *testing.T) {
	m, mock := startMock(t)
	const ttl = time.Minute
	g := newGroup(t, m, "t", groupConfig, manager.GroupOptions{IdleTTL: ttl})
	slow := newGroup(t, m, "slow", manager.Config{
		Strategy:  breaker.Consecutive{Failures: 1},
		Recover:   recover.BasicTimeout{Open: time.Second},
		SlowStart: time.Hour,
	}, manager.GroupOptions{IdleTTL: ttl})

	idle := get(t, g, "idle")
	release(t, idle, nil)
	counting := get(t, g, "counting")
	fail(t, counting, 4)
	open := get(t, g, "open")
	fail(t, open, 5)
	forced := get(t, g, "forced")
	require.NoError(t, forced.ForceOpen())
	half := get(t, g, "half")
	require.NoError(t, half.ForceOpen())
	require.NoError(t, half.Reset())
	fail(t, half, 5)
	ramping := get(t, slow, "ramping")
	fail(t, ramping, 1)
	advance(m, mock, time.Second) // half open
	p := probe(t, ramping)
	p.Release(nil) // closed, in an hour's slow start
	m.Sync()
	require.False(t, ramping.Stats().SlowStartUntil.IsZero(), "ramping is in its slow start")

	advance(m, mock, 2*ttl)
	get(t, g, "new")    // a sweep is due
	get(t, slow, "new") // and in the other group
	m.Sync()

	_, err := idle.Acquire(context.Background())
	assert.ErrorIs(t, err, manager.ErrRemoved, "the idle, closed breaker is forgotten")
	assert.NotSame(t, idle, get(t, g, "idle"), "its key gets a fresh breaker")
	for key, b := range map[string]*manager.Breaker{"counting": counting, "open": open, "forced": forced, "half": half} {
		assert.Same(t, b, get(t, g, key), "%s is kept", key)
	}
	assert.Same(t, ramping, get(t, slow, "ramping"), "a slow-starting breaker is kept")
	fail(t, counting, 1)
	requireState(t, counting, breaker.Open, "the kept count: a fifth failure trips it")
}

// A full group with nothing to forget refuses a new key, and takes it once
// a breaker has been idle and closed for IdleTTL.
func TestGroupFullRefusesNewKeys(t *testing.T) {
	m, mock := startMock(t)
	const ttl = time.Minute
	g := newGroup(t, m, "t", groupConfig, manager.GroupOptions{Max: 2, IdleTTL: ttl})
	a, b := get(t, g, "a"), get(t, g, "b")
	fail(t, a, 1)
	fail(t, b, 1)
	advance(m, mock, 2*ttl)

	_, err := g.Get("c")
	require.ErrorIs(t, err, manager.ErrGroupFull)
	assert.Contains(t, err.Error(), `group "t": key "c"`)
	assert.Contains(t, err.Error(), "GroupOptions.Max (2)")
	assert.Equal(t, 2, g.Len())

	release(t, get(t, g, "b"), nil) // b's run of failures ends, but it was just got
	mock.Add(time.Second)
	_, err = g.Get("c")
	require.ErrorIs(t, err, manager.ErrGroupFull, "b was used within IdleTTL")

	advance(m, mock, ttl)
	c := get(t, g, "c")
	assert.Equal(t, "t/c", c.Name())
	assert.Same(t, a, get(t, g, "a"), "the failing key keeps its breaker")
	assert.Equal(t, 2, g.Len())
}

// groupKeys is how many keys TestGroupBounded sends through a group of
// groupKeys/10: 1,000,000 through 100,000 with FUSEBOX_LONG set, a
// twentieth of that otherwise, which runs in seconds under -race.
func groupKeys(t *testing.T) int {
	if runLength(t, time.Second, time.Minute) > time.Second {
		return 1_000_000
	}
	return 50_000
}

// TestGroupBounded sends many keys through a bounded group, each used for
// a while and then left: the group never holds more than Max, and a key
// counting failures (and an open one) keeps its breaker however many keys
// come.
func TestGroupBounded(t *testing.T) {
	m, mock := startMock(t)
	keys := groupKeys(t)
	maxKeys := keys / 10
	const ttl = time.Minute
	g := newGroup(t, m, "t", groupConfig, manager.GroupOptions{Max: maxKeys, IdleTTL: ttl})
	failing := get(t, g, "failing")
	fail(t, failing, 4)
	open := get(t, g, "open")
	fail(t, open, 5)

	ctx := context.Background()
	batch := maxKeys / 2
	for i := 0; i < keys; i++ {
		b, err := g.Get(fmt.Sprintf("key-%07d", i))
		if err != nil {
			t.Fatalf("Get of key %d of %d: %v", i, keys, err)
		}
		if p, err := b.Acquire(ctx); err == nil {
			p.Release(nil)
		}
		if n := g.Len(); n > maxKeys {
			t.Fatalf("after key %d the group holds %d breakers, more than Max %d", i, n, maxKeys)
		}
		if i%batch == batch-1 {
			mock.Add(ttl) // the keys so far are idle
		}
	}
	m.Sync()
	assert.LessOrEqual(t, len(m.Breakers()), maxKeys, "breakers the manager holds")
	assert.Same(t, failing, get(t, g, "failing"), "the failing key keeps its breaker")
	assert.Same(t, open, get(t, g, "open"), "the open key keeps its breaker")
	requireState(t, open, breaker.Open, "after every key")
	fail(t, failing, 1)
	requireState(t, failing, breaker.Open, "the failing key's fifth failure")
}

// TestGroupConcurrent has goroutines getting keys, calling through them and
// failing some, while the clock moves and sweeps forget idle breakers: run
// it with -race. The group stays within Max, and a breaker counting
// failures is never forgotten.
func TestGroupConcurrent(t *testing.T) {
	m, mock := startMock(t)
	const maxKeys, ttl = 200, time.Minute
	g := newGroup(t, m, "t", groupConfig, manager.GroupOptions{Max: maxKeys, IdleTTL: ttl})
	failing := get(t, g, "failing")
	fail(t, failing, 4)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // the clock
		defer wg.Done()
		for i := 0; i < 200; i++ {
			mock.Add(ttl / 2)
		}
		close(stop)
	}()
	var mu sync.Mutex
	var full, over int
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 36))
			ctx := context.Background()
			for {
				select {
				case <-stop:
					return
				default:
				}
				b, err := g.Get(fmt.Sprintf("key-%d", r.IntN(4*maxKeys)))
				if err != nil {
					mu.Lock()
					full++
					mu.Unlock()
					assert.ErrorIs(t, err, manager.ErrGroupFull)
					continue
				}
				if n := g.Len(); n > maxKeys {
					mu.Lock()
					over++
					mu.Unlock()
				}
				if p, err := b.Acquire(ctx); err == nil {
					if r.IntN(10) == 0 {
						p.Release(errBoom)
					} else {
						p.Release(nil)
					}
				}
			}
		}()
	}
	wg.Wait()
	m.Sync()
	t.Logf("Gets refused as full: %d", full)
	assert.Zero(t, over, "Gets that saw the group over Max")
	assert.LessOrEqual(t, g.Len(), maxKeys)
	assert.Same(t, failing, get(t, g, "failing"), "the failing key keeps its breaker")
	fail(t, failing, 1)
	requireState(t, failing, breaker.Open, "the failing key's fifth failure")
}

// The group validates its Config once; a key's Recover.Init runs when its
// breaker first needs a timer, on the manager's goroutine.
func TestGroupInitsRecoverWhenFirstNeeded(t *testing.T) {
	m, _ := startMock(t)
	var inits atomic.Int32
	rec := recover.Func(func() (int, error) {
		inits.Add(1)
		return 0, nil
	}, func(_ recover.Context, n int) (time.Duration, int) { return time.Minute, n + 1 })
	g := newGroup(t, m, "t", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: rec}, manager.GroupOptions{})
	assert.Equal(t, int32(1), inits.Load(), "Group validates the Config")
	for i := range 100 {
		get(t, g, fmt.Sprint(i))
	}
	m.Sync()
	assert.Equal(t, int32(1), inits.Load(), "100 keys with nothing to time")
	fail(t, get(t, g, "7"), 1)
	m.Sync()
	assert.Equal(t, int32(2), inits.Load(), "the first trip")
	requireState(t, get(t, g, "7"), breaker.Open, "after the trip")
}

// BenchmarkGroupGetNew is Group.Get of a new key: a breaker made and
// registered.
func BenchmarkGroupGetNew(b *testing.B) {
	m, _ := startMock(b)
	g := newGroup(b, m, "t", groupConfig, manager.GroupOptions{})
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%09d", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := g.Get(keys[i]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRegister is Register of a new name.
func BenchmarkRegister(b *testing.B) {
	m, _ := startMock(b)
	names := make([]string, b.N)
	for i := range names {
		names[i] = fmt.Sprintf("tenant-%09d", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := m.Register(names[i], groupConfig); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGroupGet is Group.Get of a key that exists, among 1,000.
func BenchmarkGroupGet(b *testing.B) {
	m, _ := startMock(b)
	g := newGroup(b, m, "t", groupConfig, manager.GroupOptions{})
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%09d", i)
		get(b, g, keys[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := g.Get(keys[i%len(keys)]); err != nil {
			b.Fatal(err)
		}
	}
}

package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/replicate"
	"github.com/fusebox-go/fusebox/replicate/boltstore"
	"github.com/fusebox-go/fusebox/replicate/replicatetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, path string) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestPrimary(t *testing.T) {
	replicatetest.TestPrimary(t, func(t *testing.T) replicate.Primary {
		return open(t, filepath.Join(t.TempDir(), "primary.db"))
	})
}

func TestReopenKeepsDataMarksAndSequence(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "primary.db")
	s, err := boltstore.Open(path)
	require.NoError(t, err)
	require.NoError(t, s.Put(ctx, "a", []byte("1")))
	require.NoError(t, s.Put(ctx, "b", []byte("2")))
	require.NoError(t, s.Delete(ctx, "c"))
	ea, err := s.Lookup(ctx, "a")
	require.NoError(t, err)
	cleared, err := s.Confirm(ctx, "a", ea.Seq)
	require.NoError(t, err)
	require.True(t, cleared)
	eb, err := s.Lookup(ctx, "b")
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "a second Close returns the first one's result")

	_, _, err = s.Get(ctx, "a")
	assert.Error(t, err, "a closed store refuses reads")
	assert.Error(t, s.Put(ctx, "x", nil), "a closed store refuses writes")

	s = open(t, path)
	assert.Equal(t, 2, s.PendingCount(), "b and c are still pending after the restart")
	keys, err := s.PendingKeys(ctx, "", 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "c"}, keys)
	got, err := s.Lookup(ctx, "b")
	require.NoError(t, err)
	assert.Equal(t, replicate.Entry{Value: []byte("2"), Found: true, Seq: eb.Seq}, got, "b's value and mark survive")
	got, err = s.Lookup(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, replicate.Entry{Value: []byte("1"), Found: true}, got, "a is confirmed for good")

	require.NoError(t, s.Put(ctx, "b", []byte("3")))
	got, err = s.Lookup(ctx, "b")
	require.NoError(t, err)
	assert.Greater(t, got.Seq, eb.Seq, "sequence numbers keep growing after a restart")
	cleared, err = s.Confirm(ctx, "b", eb.Seq)
	require.NoError(t, err)
	assert.False(t, cleared, "the mark of the write before the restart does not clear the newer one")
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := boltstore.Open(filepath.Join(dir, "missing", "primary.db"))
	if assert.Error(t, err) {
		assert.Contains(t, err.Error(), filepath.Join(dir, "missing", "primary.db"), "the error names the path")
	}

	junk := filepath.Join(dir, "junk.db")
	require.NoError(t, os.WriteFile(junk, []byte("this is not a bbolt file, not at all, but it is long enough to be read as one"), 0o600))
	_, err = boltstore.Open(junk)
	if assert.Error(t, err) {
		assert.Contains(t, err.Error(), junk)
	}
}

// rig is the scenario's setting with a bolt primary: a breaker on a mock
// clock that trips on the third failure in a row and stays open 100ms, and
// replica calls that time out after 50ms.
type rig struct {
	path    string
	mock    *clock.Mock
	m       *manager.Manager
	b       *manager.Breaker
	replica *replicatetest.Replica
	store   *boltstore.Store
	r       *replicate.Replicator
}

const (
	openPeriod  = 100 * time.Millisecond
	callTimeout = 50 * time.Millisecond
)

// start starts a manager, a breaker and a replicator on the store at
// g.path: a process starting.
func (g *rig) start(t *testing.T) {
	t.Helper()
	g.mock = clock.NewMock()
	g.m = manager.Start(manager.Options{Clock: g.mock})
	var err error
	g.b, err = g.m.Register("replica", manager.Config{
		Strategy: breaker.Consecutive{Failures: 3},
		Recover:  recover.BasicTimeout{Open: openPeriod},
	})
	require.NoError(t, err)
	g.store, err = boltstore.Open(g.path)
	require.NoError(t, err)
	g.r, err = replicate.New(g.store, g.replica, g.b, replicate.Options{Timeout: callTimeout, Manager: g.m, RetryInterval: time.Hour})
	require.NoError(t, err)
}

// stop closes the replicator, the store and the manager: a process
// stopping.
func (g *rig) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, g.r.Close())
	require.NoError(t, g.store.Close())
	g.m.Stop()
}

func (g *rig) put(t *testing.T, key, value string) (replicate.Result, time.Duration) {
	t.Helper()
	start := time.Now()
	res, err := g.r.Put(context.Background(), key, []byte(value))
	require.NoError(t, err)
	return res, time.Since(start)
}

func (g *rig) contents(t *testing.T, keys ...string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, k := range keys {
		v, ok, err := g.r.Get(context.Background(), k)
		require.NoError(t, err)
		if ok {
			got[k] = string(v)
		}
	}
	return got
}

func waitDrained(t *testing.T, r *replicate.Replicator, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, r.Wait(ctx), "waiting until %s; %d keys still pending", what, r.Pending())
}

// TestScenarioAcrossRestart plays the scenario with a bolt primary, and
// restarts everything (manager, breaker, store, replicator) while b..f are
// pending: nothing is lost.
func TestScenarioAcrossRestart(t *testing.T) {
	want := map[string]string{"a": "1", "b": "2", "c": "2", "d": "2", "e": "2", "f": "2"}
	keys := []string{"a", "b", "c", "d", "e", "f"}

	for _, healBefore := range []bool{true, false} {
		name := "replica recovered before the restart"
		if !healBefore {
			name = "replica still hung after the restart"
		}
		t.Run(name, func(t *testing.T) {
			g := &rig{path: filepath.Join(t.TempDir(), "primary.db"), replica: replicatetest.NewReplica()}
			g.start(t)
			res, _ := g.put(t, "a", "1")
			require.True(t, res.Replicated, "%v", res.Cause)
			g.replica.Hang()
			for _, k := range []string{"b", "c", "d"} {
				res, took := g.put(t, k, "2")
				assert.ErrorIs(t, res.Cause, context.DeadlineExceeded, k)
				assert.GreaterOrEqual(t, took, callTimeout, k)
			}
			require.Equal(t, breaker.Open, g.b.State())
			for _, k := range []string{"e", "f"} {
				res, _ := g.put(t, k, "2")
				assert.ErrorIs(t, res.Cause, breaker.ErrOpen, k)
			}
			require.Equal(t, 5, g.r.Pending())

			g.stop(t) // with five keys pending
			if healBefore {
				g.replica.Heal()
			}
			g.start(t)
			defer g.stop(t)
			require.Equal(t, 5, g.r.Pending(), "the reopened primary knows the pending keys")

			if !healBefore {
				// Catch-up at start meets the hung replica: three
				// timeouts open the new breaker.
				deadline := time.Now().Add(10 * time.Second)
				for g.b.State() != breaker.Open {
					require.True(t, time.Now().Before(deadline), "catch-up at start never opened the breaker")
					time.Sleep(time.Millisecond)
				}
				g.replica.Heal()
				g.mock.Add(openPeriod)
				g.m.Sync() // half_open: the replicator's own trial
			}
			waitDrained(t, g.r, "catch-up after the restart")
			assert.Equal(t, breaker.Closed, g.b.State())
			assert.Equal(t, want, g.replica.Snapshot(), "the replica")
			assert.Equal(t, want, g.contents(t, keys...), "the primary")
		})
	}
}

// soakDuration is how long TestSoak writes: a few seconds by default,
// a minute with FUSEBOX_SOAK=long.
func soakDuration() time.Duration {
	if os.Getenv("FUSEBOX_SOAK") == "long" {
		return time.Minute
	}
	return 1500 * time.Millisecond
}

// TestSoak: several writers put and delete a few hundred keys while the
// replica hangs, fails and recovers at random, and the bolt primary is
// closed and reopened twice (with a new replicator each time). At the end,
// once the replica has recovered, replica and primary hold the same keys
// and values, and no key's history on the replica goes back in time. Set
// FUSEBOX_SOAK=long for a longer run.
func TestSoak(t *testing.T) {
	const (
		keys    = 300
		writers = 4
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, duration %v", seed, soakDuration())

	m := manager.Start(manager.Options{})
	defer m.Stop()
	b, err := m.Register("replica", manager.Config{
		Strategy: breaker.Consecutive{Failures: 3},
		Recover:  recover.BasicTimeout{Open: 20 * time.Millisecond},
	})
	require.NoError(t, err)
	replica := replicatetest.NewReplica()
	replica.SetLatency(200 * time.Microsecond)
	path := filepath.Join(t.TempDir(), "primary.db")
	opts := replicate.Options{
		Timeout:       10 * time.Millisecond,
		Manager:       m,
		CatchUpPause:  100 * time.Microsecond,
		RetryInterval: 10 * time.Millisecond,
	}

	// Writers hold mu's read lock for each write; a restart takes the
	// write lock.
	var mu sync.RWMutex
	var store *boltstore.Store
	var r *replicate.Replicator
	restart := func() {
		store, err = boltstore.Open(path)
		require.NoError(t, err)
		r, err = replicate.New(store, replica, b, opts)
		require.NoError(t, err)
	}
	restart()

	var (
		writes, replicated, declined atomic.Int64
		stop                         = make(chan struct{})
		wg                           sync.WaitGroup
	)
	key := func(i int) string { return fmt.Sprintf("k%03d", i) }
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			version := make(map[int]int)
			ctx := context.Background()
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := w + writers*rng.IntN(keys/writers) // this writer's keys only
				mu.RLock()
				var res replicate.Result
				var err error
				if rng.IntN(5) == 0 {
					res, err = r.Delete(ctx, key(i))
				} else {
					version[i]++
					res, err = r.Put(ctx, key(i), fmt.Appendf(nil, "%08d", version[i]))
				}
				mu.RUnlock()
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				writes.Add(1)
				if res.Replicated {
					replicated.Add(1)
				} else if errors.Is(res.Cause, breaker.ErrOpen) {
					declined.Add(1)
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // chaos
		defer wg.Done()
		rng := rand.New(rand.NewPCG(seed, 99))
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(2+rng.IntN(20)) * time.Millisecond):
			}
			switch n := rng.IntN(10); {
			case n < 3:
				replica.Hang()
			case n < 5:
				replica.Fail(nil)
			default:
				replica.Heal()
			}
		}
	}()

	d := soakDuration()
	for i := range 2 {
		time.Sleep(d / 3) // the writers work meanwhile
		mu.Lock()
		require.NoError(t, r.Close())
		pending := store.PendingCount()
		require.NoError(t, store.Close())
		restart()
		assert.Equal(t, pending, r.Pending(), "restart %d: the reopened primary counts the same pending keys", i+1)
		t.Logf("restart %d with %d keys pending", i+1, pending)
		mu.Unlock()
	}
	time.Sleep(d / 3)
	close(stop)
	wg.Wait()
	defer func() {
		require.NoError(t, r.Close())
		require.NoError(t, store.Close())
	}()
	t.Logf("%d writes: %d replicated at once, %d declined by the open breaker; %d pending at the end",
		writes.Load(), replicated.Load(), declined.Load(), r.Pending())
	require.Positive(t, declined.Load(), "the breaker opened at some point")

	replica.Heal()
	waitDrained(t, r, "the replica catches up after the soak")

	ctx := context.Background()
	want := map[string]string{}
	for i := range keys {
		v, ok, err := r.Get(ctx, key(i))
		require.NoError(t, err)
		if ok {
			want[key(i)] = string(v)
		}
	}
	assert.Equal(t, want, replica.Snapshot(), "replica and primary hold the same keys and values")
	for _, k := range replica.Keys() {
		last := ""
		for j, c := range replica.History(k) {
			if c.Deleted {
				continue
			}
			require.GreaterOrEqual(t, string(c.Value), last, "%s: write %d of the replica's history goes back in time", k, j)
			last = string(c.Value)
		}
	}
}

// TestNilContext: every method refuses a nil context with an error rather
// than dereferencing it.
func TestNilContext(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "primary.db"))
	var nilCtx context.Context
	assert.ErrorIs(t, s.Put(nilCtx, "a", []byte("1")), replicate.ErrNilContext, "Put")
	assert.ErrorIs(t, s.Delete(nilCtx, "a"), replicate.ErrNilContext, "Delete")
	_, _, err := s.Get(nilCtx, "a")
	assert.ErrorIs(t, err, replicate.ErrNilContext, "Get")
	_, err = s.Lookup(nilCtx, "a")
	assert.ErrorIs(t, err, replicate.ErrNilContext, "Lookup")
	_, err = s.Confirm(nilCtx, "a", 1)
	assert.ErrorIs(t, err, replicate.ErrNilContext, "Confirm")
	_, err = s.PendingKeys(nilCtx, "", 10)
	assert.ErrorIs(t, err, replicate.ErrNilContext, "PendingKeys")
	assert.Equal(t, 0, s.PendingCount(), "nothing was written")
}

// TestKeyTooLong: a key bbolt cannot store is an error that says so, and
// writes nothing.
func TestKeyTooLong(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "primary.db"))
	err := s.Put(context.Background(), strings.Repeat("k", 40000), []byte("v"))
	if assert.Error(t, err) {
		assert.Contains(t, err.Error(), "40000 bytes")
	}
	assert.Equal(t, 0, s.PendingCount())
}

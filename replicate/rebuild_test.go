package replicate_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/replicate"
	"github.com/fusebox-go/fusebox/replicate/replicatetest"
)

// rebuildKeys is how many keys the rebuild tests put in the primary: more
// than the rebuild reads or records at a time.
const rebuildKeys = 300

func rebuildKey(i int) string { return fmt.Sprintf("k%03d", i) }

// hookedReplica is a replicatetest.Replica (a Lister) whose writes first
// go through before, which may fail them.
type hookedReplica struct {
	*replicatetest.Replica
	before func(key string) error
}

func (h *hookedReplica) Put(ctx context.Context, key string, value []byte) error {
	if err := h.before(key); err != nil {
		return err
	}
	return h.Replica.Put(ctx, key, value)
}

func (h *hookedReplica) Delete(ctx context.Context, key string) error {
	if err := h.before(key); err != nil {
		return err
	}
	return h.Replica.Delete(ctx, key)
}

// writeOnly hides the Lister of the replica it wraps.
type writeOnly struct{ replicate.Replica }

// rebuildRig is a replicator on a memory primary that holds rebuildKeys
// keys, all replicated, in front of a replica the test then damages.
type rebuildRig struct {
	m       *manager.Manager
	b       *manager.Breaker
	primary replicate.Primary
	replica *replicatetest.Replica
	r       *replicate.Replicator
}

func newRebuildRig(t *testing.T, cfg manager.Config, wrap func(*replicatetest.Replica) replicate.Replica) *rebuildRig {
	t.Helper()
	g := &rebuildRig{primary: replicate.NewMemory(), replica: replicatetest.NewReplica()}
	g.m = manager.Start(manager.Options{})
	t.Cleanup(g.m.Stop)
	var err error
	g.b, err = g.m.Register("replica", cfg)
	require.NoError(t, err)
	var rep replicate.Replica = g.replica
	if wrap != nil {
		rep = wrap(g.replica)
	}
	g.r, err = replicate.New(g.primary, rep, g.b, replicate.Options{
		Timeout: 5 * time.Second, CatchUpPause: time.Microsecond, RetryInterval: 5 * time.Millisecond, Manager: g.m,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.r.Close() })
	ctx := context.Background()
	for i := range rebuildKeys {
		res, err := g.r.Put(ctx, rebuildKey(i), []byte(rebuildKey(i)))
		require.NoError(t, err)
		require.True(t, res.Replicated, "%v", res.Cause)
	}
	return g
}

// contents is everything the primary holds.
func (g *rebuildRig) contents(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	got := map[string]string{}
	after := ""
	for {
		keys, err := g.primary.Keys(ctx, after, 100)
		require.NoError(t, err)
		if len(keys) == 0 {
			return got
		}
		for _, k := range keys {
			v, ok, err := g.primary.Get(ctx, k)
			require.NoError(t, err)
			if ok {
				got[k] = string(v)
			}
		}
		after = keys[len(keys)-1]
	}
}

func (g *rebuildRig) progress(t *testing.T) replicate.Progress {
	t.Helper()
	p, err := g.primary.RebuildProgress(context.Background())
	require.NoError(t, err)
	return p
}

// damage wipes the replica and gives it keys the primary does not hold:
// one it never had, and one deleted from the primary while the replica
// was not told.
func (g *rebuildRig) damage(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	_, err := g.r.Delete(ctx, rebuildKey(7))
	require.NoError(t, err)
	g.replica.Wipe()
	require.NoError(t, g.replica.Put(ctx, "stale", []byte("never in the primary")))
	require.NoError(t, g.replica.Put(ctx, rebuildKey(7), []byte("deleted from the primary")))
}

func TestRebuildWipedReplica(t *testing.T) {
	g := newRebuildRig(t, manager.Config{}, nil)
	g.damage(t)
	require.NoError(t, g.r.Rebuild(context.Background()))
	assert.Equal(t, g.contents(t), g.replica.Snapshot(), "the replica holds exactly what the primary holds")
	assert.Len(t, g.replica.Snapshot(), rebuildKeys-1)
	assert.Equal(t, replicate.Progress{}, g.progress(t), "no rebuild running afterwards")
	assert.Equal(t, 0, g.r.Pending())
}

func TestRebuildWithoutLister(t *testing.T) {
	g := newRebuildRig(t, manager.Config{}, func(r *replicatetest.Replica) replicate.Replica { return writeOnly{r} })
	g.damage(t)
	require.NoError(t, g.r.Rebuild(context.Background()))
	want := g.contents(t)
	want["stale"] = "never in the primary"
	want[rebuildKey(7)] = "deleted from the primary"
	assert.Equal(t, want, g.replica.Snapshot(), "every key of the primary sent; what only the replica holds stays")
}

// TestRebuildResumesAfterCancel: a rebuild whose ctx is canceled half way
// records where it stopped; the next Rebuild sends only the keys after it.
func TestRebuildResumesAfterCancel(t *testing.T) {
	var (
		calls  atomic.Int64
		cancel atomic.Pointer[context.CancelFunc] // set while the first Rebuild runs
	)
	g := newRebuildRig(t, manager.Config{}, func(r *replicatetest.Replica) replicate.Replica {
		return &hookedReplica{Replica: r, before: func(string) error {
			if c := cancel.Load(); calls.Add(1) == 200 && c != nil {
				(*c)()
			}
			return nil
		}}
	})
	g.damage(t)
	ctx, cancelCtx := context.WithCancel(context.Background())
	defer cancelCtx()
	cancel.Store(&cancelCtx)
	calls.Store(0)
	err := g.r.Rebuild(ctx)
	require.ErrorIs(t, err, context.Canceled)
	p := g.progress(t)
	require.True(t, p.Running, "the rebuild is recorded as unfinished")
	// The walk: "k000".."k299" then "stale"; the 200th call is k199, or
	// k200 with k007's delete among them.
	assert.GreaterOrEqual(t, p.After, rebuildKey(190), "the progress recorded when the rebuild stopped")
	assert.Less(t, p.After, rebuildKey(201))

	calls.Store(0)
	cancel.Store(nil)
	require.NoError(t, g.r.Rebuild(context.Background()))
	wantCalls := 1 // "stale", deleted
	for i := range rebuildKeys {
		if k := rebuildKey(i); k > p.After && i != 7 {
			wantCalls++
		}
	}
	assert.Equal(t, int64(wantCalls), calls.Load(), "the second Rebuild sent only the keys after %q", p.After)
	assert.Equal(t, g.contents(t), g.replica.Snapshot())
	assert.Equal(t, replicate.Progress{}, g.progress(t))
}

// TestRebuildStopsAtTheOpenBreaker: a replica that fails trips the
// breaker; the rebuild stops with the breaker's error, the keys the
// replica refused are pending, and a later Rebuild finishes the job.
func TestRebuildStopsAtTheOpenBreaker(t *testing.T) {
	var down atomic.Bool
	g := newRebuildRig(t, manager.Config{
		Strategy: breaker.Consecutive{Failures: 3},
		Recover:  recover.BasicTimeout{Open: time.Hour},
	}, func(r *replicatetest.Replica) replicate.Replica {
		return &hookedReplica{Replica: r, before: func(key string) error {
			if down.Load() && key >= rebuildKey(100) {
				return replicatetest.ErrDown
			}
			return nil
		}}
	})
	g.replica.Wipe()
	down.Store(true)
	err := g.r.Rebuild(context.Background())
	require.ErrorIs(t, err, breaker.ErrOpen)
	assert.Contains(t, err.Error(), `rebuild stopped before "k103"`)
	assert.Equal(t, replicate.Progress{Running: true, After: rebuildKey(102)}, g.progress(t))
	assert.Equal(t, 3, g.r.Pending(), "the three keys refused are pending")

	down.Store(false)
	require.NoError(t, g.b.Reset())
	require.NoError(t, g.r.Rebuild(context.Background()))
	wait(t, g.r, "catch-up delivers the keys the rebuild handed it")
	assert.Equal(t, g.contents(t), g.replica.Snapshot())
}

// TestRebuildHandsRefusedKeysToCatchUp: a key the replica refuses while
// the breaker stays closed is marked pending and the rebuild goes on.
func TestRebuildHandsRefusedKeysToCatchUp(t *testing.T) {
	var refuse atomic.Bool
	g := newRebuildRig(t, manager.Config{Strategy: breaker.Consecutive{Failures: 100}}, func(r *replicatetest.Replica) replicate.Replica {
		return &hookedReplica{Replica: r, before: func(key string) error {
			if key == rebuildKey(50) && refuse.Load() {
				return errors.New("not this one")
			}
			return nil
		}}
	})
	g.replica.Wipe()
	refuse.Store(true)
	require.NoError(t, g.r.Rebuild(context.Background()))
	_, ok := g.replica.Get(rebuildKey(50))
	assert.False(t, ok)
	assert.Equal(t, 1, g.r.Pending(), "the refused key is pending")
	refuse.Store(false)
	wait(t, g.r, "catch-up delivers it")
	assert.Equal(t, g.contents(t), g.replica.Snapshot())
}

// TestRebuildWithLiveWrites: writers keep writing while a rebuild runs
// over a wiped replica; the writes are not held up, and at the end the
// replica holds what the primary holds, no key's history going back.
func TestRebuildWithLiveWrites(t *testing.T) {
	g := newRebuildRig(t, manager.Config{}, nil)
	g.replica.Wipe()
	g.replica.SetLatency(100 * time.Microsecond)
	ctx := context.Background()
	const writers = 4

	rebuilt := make(chan error, 1)
	var writesDuring atomic.Int64
	var rebuilding atomic.Bool
	rebuilding.Store(true)
	go func() {
		err := g.r.Rebuild(ctx)
		rebuilding.Store(false)
		rebuilt <- err
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := 1; rebuilding.Load() || v < 20; v++ {
				for i := w; i < rebuildKeys; i += 37 * writers { // a few keys each, spread over the walk
					var err error
					if v%7 == 0 {
						_, err = g.r.Delete(ctx, rebuildKey(i))
					} else {
						_, err = g.r.Put(ctx, rebuildKey(i), fmt.Appendf(nil, "v%06d", v))
					}
					if err != nil {
						t.Error(err)
						return
					}
					if rebuilding.Load() {
						writesDuring.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, <-rebuilt)
	wait(t, g.r, "the last writes reach the replica")
	assert.Positive(t, writesDuring.Load(), "writes went through while the rebuild ran")
	assert.True(t, maps.Equal(g.contents(t), g.replica.Snapshot()), "the replica holds what the primary holds")
	for _, k := range g.replica.Keys() {
		last := ""
		for i, c := range g.replica.History(k) {
			if c.Deleted || string(c.Value) == k { // a delete, or the value before the test
				continue
			}
			require.GreaterOrEqual(t, string(c.Value), last, "%s: write %d of the replica's history goes back in time", k, i)
			last = string(c.Value)
		}
	}
}

func TestRebuildMisuse(t *testing.T) {
	g := newRebuildRig(t, manager.Config{}, nil)
	var nilCtx context.Context
	assert.ErrorIs(t, g.r.Rebuild(nilCtx), replicate.ErrNilContext)
	require.NoError(t, g.r.Close())
	assert.ErrorIs(t, g.r.Rebuild(context.Background()), replicate.ErrClosed)
}

// panickyLister is a replica whose listing panics.
type panickyLister struct{ replicate.Replica }

func (panickyLister) ListKeys(context.Context, string, int) ([]string, error) { panic("list") }

func TestRebuildListerPanicIsAnError(t *testing.T) {
	g := newRebuildRig(t, manager.Config{}, func(r *replicatetest.Replica) replicate.Replica { return panickyLister{r} })
	err := g.r.Rebuild(context.Background())
	var pe *replicate.PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "Lister.ListKeys", pe.Func)
	assert.True(t, g.progress(t).Running, "the rebuild is left unfinished, to be resumed")
}

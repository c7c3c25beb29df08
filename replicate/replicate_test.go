package replicate_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/replicate"
	"github.com/fusebox-go/fusebox/replicate/replicatetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	openPeriod  = 100 * time.Millisecond
	callTimeout = 50 * time.Millisecond
)

// rig is the scenario's setting: a manager on a mock clock, a breaker that
// trips on the third failure in a row and stays open 100ms, an in-memory
// replica, and a replicator whose replica calls time out after 50ms.
type rig struct {
	mock    *clock.Mock
	m       *manager.Manager
	b       *manager.Breaker
	replica *replicatetest.Replica
	primary replicate.Primary
	r       *replicate.Replicator
}

// newRig builds the rig; with events, the replicator gets the manager
// (Options.Manager) and learns of half_open from its events.
func newRig(t *testing.T, primary replicate.Primary, events bool, opts replicate.Options) *rig {
	t.Helper()
	g := &rig{mock: clock.NewMock(), replica: replicatetest.NewReplica(), primary: primary}
	g.m = manager.Start(manager.Options{Clock: g.mock})
	t.Cleanup(g.m.Stop)
	var err error
	g.b, err = g.m.Register("replica", manager.Config{
		Strategy: breaker.Consecutive{Failures: 3},
		Recover:  recover.BasicTimeout{Open: openPeriod},
	})
	require.NoError(t, err)
	opts.Timeout = callTimeout
	if events {
		opts.Manager = g.m
	}
	g.r, err = replicate.New(primary, g.replica, g.b, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.r.Close() })
	return g
}

// put writes key=value and returns the result and how long it took.
func (g *rig) put(t *testing.T, key, value string) (replicate.Result, time.Duration) {
	t.Helper()
	start := time.Now()
	res, err := g.r.Put(context.Background(), key, []byte(value))
	require.NoError(t, err, "Put(%s): the primary write", key)
	return res, time.Since(start)
}

// primaryContents reads keys from the primary, absent ones left out.
func primaryContents(t *testing.T, p replicate.Primary, keys []string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, k := range keys {
		v, ok, err := p.Get(context.Background(), k)
		require.NoError(t, err)
		if ok {
			got[k] = string(v)
		}
	}
	return got
}

// wait waits, with a deadline, until the replicator has no key pending.
func wait(t *testing.T, r *replicate.Replicator, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, r.Wait(ctx), "waiting until %s; %d keys still pending", what, r.Pending())
}

// hangAndTrip plays the scenario up to the open breaker: a=1 replicated,
// then the replica hangs; b, c, d time out after the full 50ms and open
// the breaker; e and f are declined at once.
func hangAndTrip(t *testing.T, g *rig) {
	t.Helper()
	res, _ := g.put(t, "a", "1")
	require.True(t, res.Replicated, "a=1 with a healthy replica: %v", res.Cause)
	require.NoError(t, res.Cause)

	g.replica.Hang()
	for _, k := range []string{"b", "c", "d"} {
		res, took := g.put(t, k, "2")
		assert.False(t, res.Replicated, "%s=2 with a hung replica", k)
		assert.ErrorIs(t, res.Cause, context.DeadlineExceeded, "%s=2: the cause is the timeout", k)
		assert.GreaterOrEqual(t, took, callTimeout, "%s=2 waits the whole timeout", k)
	}
	require.Equal(t, breaker.Open, g.b.State(), "three timeouts in a row open the breaker")

	calls := g.replica.Calls()
	for _, k := range []string{"e", "f"} {
		res, took := g.put(t, k, "2")
		assert.False(t, res.Replicated, "%s=2 behind the open breaker", k)
		assert.ErrorIs(t, res.Cause, breaker.ErrOpen, "%s=2: declined by the breaker", k)
		assert.Less(t, took, callTimeout, "%s=2 does not wait for the replica", k)
	}
	assert.Equal(t, calls, g.replica.Calls(), "declined writes make no replica call")
	assert.Equal(t, 5, g.r.Pending(), "b..f are pending")
	assert.Equal(t, map[string]string{"a": "1"}, g.replica.Snapshot())
}

var scenarioKeys = []string{"a", "b", "c", "d", "e", "f", "g"}

func TestScenario(t *testing.T) {
	t.Run("the replicator makes the trial itself", func(t *testing.T) {
		g := newRig(t, replicate.NewMemory(), true, replicate.Options{RetryInterval: time.Hour})

		hangAndTrip(t, g)
		g.replica.Heal()
		g.mock.Add(openPeriod)
		g.m.Sync() // half_open: the replicator's trial goes through, catch-up follows
		wait(t, g.r, "catch-up after the replicator's own trial")

		assert.Equal(t, breaker.Closed, g.b.State())
		want := map[string]string{"a": "1", "b": "2", "c": "2", "d": "2", "e": "2", "f": "2"}
		assert.Equal(t, want, g.replica.Snapshot(), "the replica")
		assert.Equal(t, want, primaryContents(t, g.primary, scenarioKeys), "the primary")
	})

	t.Run("a new write is the trial", func(t *testing.T) {
		// No manager and long intervals: nothing but the write can
		// make the trial within the test.
		g := newRig(t, replicate.NewMemory(), false, replicate.Options{WatchInterval: time.Hour, RetryInterval: time.Hour})
		hangAndTrip(t, g)
		g.replica.Heal()
		g.mock.Add(openPeriod)
		g.m.Sync()
		require.Equal(t, breaker.HalfOpen, g.b.State())

		res, _ := g.put(t, "g", "3")
		assert.True(t, res.Replicated, "g=3 is the trial: %v", res.Cause)
		assert.Equal(t, breaker.Closed, g.b.State(), "the trial closed the breaker")
		wait(t, g.r, "catch-up after the trial write")

		want := map[string]string{"a": "1", "b": "2", "c": "2", "d": "2", "e": "2", "f": "2", "g": "3"}
		assert.Equal(t, want, g.replica.Snapshot(), "the replica")
		assert.Equal(t, want, primaryContents(t, g.primary, scenarioKeys), "the primary")
	})

	t.Run("without a manager the replicator watches the breaker", func(t *testing.T) {
		g := newRig(t, replicate.NewMemory(), false, replicate.Options{WatchInterval: time.Millisecond, RetryInterval: time.Hour})
		hangAndTrip(t, g)
		g.replica.Heal()
		g.mock.Add(openPeriod)
		g.m.Sync()
		wait(t, g.r, "catch-up after the trial found by watching")

		assert.Equal(t, breaker.Closed, g.b.State())
		want := map[string]string{"a": "1", "b": "2", "c": "2", "d": "2", "e": "2", "f": "2"}
		assert.Equal(t, want, g.replica.Snapshot())
	})
}

func TestFailedTrialReopens(t *testing.T) {
	g := newRig(t, replicate.NewMemory(), true, replicate.Options{RetryInterval: time.Hour})
	hangAndTrip(t, g)

	events, unsubscribe := g.m.Subscribe(16)
	defer unsubscribe()
	g.mock.Add(openPeriod)
	g.m.Sync() // half_open, and the replica still hangs: the trial fails
	want := []breaker.Transition{
		{From: breaker.Open, To: breaker.HalfOpen},
		{From: breaker.HalfOpen, To: breaker.Probing},
		{From: breaker.Probing, To: breaker.Open},
	}
	for i, tr := range want {
		select {
		case ev := <-events:
			assert.Equal(t, tr, ev.Transition, "event %d", i)
		case <-time.After(10 * time.Second):
			t.Fatalf("no event %d (%v)", i, tr)
		}
	}
	assert.Equal(t, 5, g.r.Pending(), "nothing was confirmed")

	g.replica.Heal()
	g.mock.Add(openPeriod)
	g.m.Sync()
	wait(t, g.r, "catch-up after the second trial")
	assert.Equal(t, breaker.Closed, g.b.State())
	assert.Equal(t, map[string]string{"a": "1", "b": "2", "c": "2", "d": "2", "e": "2", "f": "2"}, g.replica.Snapshot())
}

func TestDeleteIsReplicated(t *testing.T) {
	g := newRig(t, replicate.NewMemory(), false, replicate.Options{WatchInterval: time.Millisecond})
	ctx := context.Background()
	g.put(t, "a", "1")
	g.put(t, "b", "1")
	res, err := g.r.Delete(ctx, "a")
	require.NoError(t, err)
	assert.True(t, res.Replicated, "%v", res.Cause)
	assert.Equal(t, map[string]string{"b": "1"}, g.replica.Snapshot())

	// Missed deletes are sent as deletes by catch-up.
	g.replica.Fail(nil)
	for range 3 {
		res, err = g.r.Delete(ctx, "b")
		require.NoError(t, err)
		assert.ErrorIs(t, res.Cause, replicatetest.ErrDown)
	}
	require.Equal(t, breaker.Open, g.b.State())
	g.replica.Heal()
	g.mock.Add(openPeriod)
	g.m.Sync()
	wait(t, g.r, "the delete of b reaches the replica")
	assert.Empty(t, g.replica.Snapshot())
	_, ok, err := g.r.Get(ctx, "b")
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestReplicaErrorIsTheCause(t *testing.T) {
	g := newRig(t, replicate.NewMemory(), false, replicate.Options{})
	boom := errors.New("disk full")
	g.replica.Fail(boom)
	res, took := g.put(t, "a", "1")
	assert.False(t, res.Replicated)
	assert.ErrorIs(t, res.Cause, boom)
	assert.Less(t, took, callTimeout, "a replica that is down fails at once")
	assert.Equal(t, 1, g.r.Pending())
	assert.Equal(t, breaker.Closed, g.b.State(), "one failure does not trip Consecutive{3}")
}

// TestRetryWhileClosed: a copy that fails while the breaker
// stays closed is retried after RetryInterval, without a new write.
func TestRetryWhileClosed(t *testing.T) {
	g := newRig(t, replicate.NewMemory(), false, replicate.Options{RetryInterval: 5 * time.Millisecond})
	g.replica.Fail(nil)
	res, _ := g.put(t, "a", "1")
	require.False(t, res.Replicated)
	require.Equal(t, breaker.Closed, g.b.State())
	g.replica.Heal()
	wait(t, g.r, "the retry")
	assert.Equal(t, map[string]string{"a": "1"}, g.replica.Snapshot())
}

func TestStartCatchesUp(t *testing.T) {
	primary := replicate.NewMemory()
	ctx := context.Background()
	for _, k := range []string{"x", "y", "z"} {
		require.NoError(t, primary.Put(ctx, k, []byte(k+"!")))
	}
	require.NoError(t, primary.Delete(ctx, "gone"))
	g := newRig(t, primary, false, replicate.Options{})
	wait(t, g.r, "catch-up at start")
	assert.Equal(t, map[string]string{"x": "x!", "y": "y!", "z": "z!"}, g.replica.Snapshot())
	assert.Equal(t, []replicatetest.Change{{Deleted: true}}, g.replica.History("gone"), "an absent pending key is sent as a delete")
}

// TestPerKeyOrder writes each key from one goroutine with growing
// versions while the replica fails now and then (without tripping the
// breaker), so that catch-up keeps resending keys that live writes are
// writing again; the replica must never apply an older version of a key
// after a newer one.
func TestPerKeyOrder(t *testing.T) {
	m := manager.Start(manager.Options{})
	defer m.Stop()
	b, err := m.Register("replica", manager.Config{Strategy: breaker.Consecutive{Failures: 1 << 30}})
	require.NoError(t, err)
	replica := replicatetest.NewReplica()
	replica.SetLatency(200 * time.Microsecond)
	r, err := replicate.New(replicate.NewMemory(), replica, b, replicate.Options{
		Timeout: time.Second, CatchUpPause: time.Microsecond, RetryInterval: time.Millisecond,
	})
	require.NoError(t, err)
	defer r.Close()
	ctx := context.Background()
	const writers, keysEach, versions = 4, 5, 150

	stop := make(chan struct{})
	var chaos sync.WaitGroup
	chaos.Add(1)
	go func() {
		defer chaos.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if i%2 == 0 {
				replica.Fail(nil)
			} else {
				replica.Heal()
			}
		}
	}()

	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := range versions {
				for k := range keysEach {
					key := fmt.Sprintf("w%d-k%d", w, k)
					if _, err := r.Put(ctx, key, fmt.Appendf(nil, "%04d", v)); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	chaos.Wait()
	replica.Heal()
	wait(t, r, "the last versions reach the replica")

	for w := range writers {
		for k := range keysEach {
			key := fmt.Sprintf("w%d-k%d", w, k)
			last := ""
			for i, c := range replica.History(key) {
				require.False(t, c.Deleted)
				require.GreaterOrEqual(t, string(c.Value), last, "%s: write %d of the replica's history goes back in time", key, i)
				last = string(c.Value)
			}
			assert.Equal(t, fmt.Sprintf("%04d", versions-1), last, "%s ends at the last version", key)
		}
	}
}

// TestCatchUpRacesLiveWrites: catch-up and live writes of the same keys
// run at once; at the end the replica holds the latest values.
func TestCatchUpRacesLiveWrites(t *testing.T) {
	primary := replicate.NewMemory()
	ctx := context.Background()
	const keys = 50
	for i := range keys {
		require.NoError(t, primary.Put(ctx, fmt.Sprintf("k%02d", i), []byte("old")))
	}
	g := newRig(t, primary, false, replicate.Options{CatchUpPause: time.Microsecond}) // catch-up starts with New
	for i := range keys {
		_, err := g.r.Put(ctx, fmt.Sprintf("k%02d", i), []byte("new"))
		require.NoError(t, err)
	}
	wait(t, g.r, "catch-up and writes are done")
	for i := range keys {
		k := fmt.Sprintf("k%02d", i)
		v, _ := g.replica.Get(k)
		assert.Equal(t, "new", string(v), k)
	}
}

func TestCloseCutsHungCallsShortWithoutFailure(t *testing.T) {
	var mu sync.Mutex
	var seen []error
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()
	b, err := m.Register("replica", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		// A classifier that counts every error, cancellations too: Close
		// must not let it see its own cancellation.
		Classify: func(err error) classify.Outcome {
			mu.Lock()
			seen = append(seen, err)
			mu.Unlock()
			if err != nil {
				return classify.Failure
			}
			return classify.Success
		},
	})
	require.NoError(t, err)
	replica := replicatetest.NewReplica()
	r, err := replicate.New(replicate.NewMemory(), replica, b, replicate.Options{Timeout: time.Hour})
	require.NoError(t, err)

	replica.Hang()
	type answer struct {
		res replicate.Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := r.Put(context.Background(), "a", []byte("1"))
		done <- answer{res, err}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for replica.Hung() == 0 {
		require.True(t, time.Now().Before(deadline), "the write never reached the replica")
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, r.Close())
	a := <-done
	require.NoError(t, a.err, "the primary write succeeded")
	assert.False(t, a.res.Replicated)
	assert.ErrorIs(t, a.res.Cause, replicate.ErrClosed)
	assert.Equal(t, breaker.Closed, b.State(), "Close's cancellation is not a failure")
	mu.Lock()
	assert.Empty(t, seen, "the classifier never saw the cancellation")
	mu.Unlock()
	assert.Equal(t, 1, r.Pending(), "the key stays pending")

	_, err = r.Put(context.Background(), "b", []byte("2"))
	assert.ErrorIs(t, err, replicate.ErrClosed)
	_, err = r.Delete(context.Background(), "b")
	assert.ErrorIs(t, err, replicate.ErrClosed)
	_, _, err = r.Get(context.Background(), "a")
	assert.ErrorIs(t, err, replicate.ErrClosed)
	assert.ErrorIs(t, r.Wait(context.Background()), replicate.ErrClosed, "nothing will drain the pending key")
	assert.NoError(t, r.Close(), "a second Close does nothing")
}

func TestCallerCancellationIsNotAFailure(t *testing.T) {
	g := newRig(t, replicate.NewMemory(), false, replicate.Options{})
	g.replica.Hang()
	for i := range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			for g.replica.Hung() == 0 {
				time.Sleep(100 * time.Microsecond)
			}
			cancel()
		}()
		res, err := g.r.Put(ctx, "k", []byte{byte(i)})
		require.NoError(t, err)
		assert.ErrorIs(t, res.Cause, context.Canceled)
	}
	assert.Equal(t, breaker.Closed, g.b.State(), "classify.Default ignores the caller's cancellations")
}

func TestNewRejectsBadInput(t *testing.T) {
	m := manager.Start(manager.Options{})
	defer m.Stop()
	b, err := m.Register("rep", manager.Config{})
	require.NoError(t, err)
	other := manager.Start(manager.Options{})
	defer other.Stop()
	_, err = other.Register("rep", manager.Config{})
	require.NoError(t, err)
	p, rep := replicate.NewMemory(), replicatetest.NewReplica()

	cases := []struct {
		name       string
		p          replicate.Primary
		r          replicate.Replica
		b          *manager.Breaker
		opts       replicate.Options
		wantInText string
	}{
		{"nil breaker", p, rep, nil, replicate.Options{}, "breaker must not be nil"},
		{"nil primary", nil, rep, b, replicate.Options{}, `"rep": the Primary`},
		{"nil replica", p, nil, b, replicate.Options{}, `"rep": the Replica`},
		{"negative timeout", p, rep, b, replicate.Options{Timeout: -1}, `"rep": Options.Timeout must not be negative`},
		{"negative watch", p, rep, b, replicate.Options{WatchInterval: -1}, "Options.WatchInterval"},
		{"negative pause", p, rep, b, replicate.Options{CatchUpPause: -1}, "Options.CatchUpPause"},
		{"negative retry", p, rep, b, replicate.Options{RetryInterval: -1}, "Options.RetryInterval"},
		{"foreign manager", p, rep, b, replicate.Options{Manager: other}, `"rep": Options.Manager does not hold`},
	}
	for _, c := range cases {
		r, err := replicate.New(c.p, c.r, c.b, c.opts)
		if assert.Error(t, err, c.name) {
			assert.Contains(t, err.Error(), c.wantInText, c.name)
		}
		assert.Nil(t, r, c.name)
	}

	r, err := replicate.New(p, rep, b, replicate.Options{})
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Put(context.Background(), "", []byte("v"))
	assert.ErrorIs(t, err, replicate.ErrEmptyKey)
	_, err = r.Delete(context.Background(), "")
	assert.ErrorIs(t, err, replicate.ErrEmptyKey)
}

func TestPrimaryErrorIsReturned(t *testing.T) {
	g := newRig(t, replicate.NewMemory(), false, replicate.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := g.r.Put(ctx, "a", []byte("1"))
	assert.ErrorIs(t, err, context.Canceled, "the primary refused the write")
	assert.Equal(t, replicate.Result{}, res)
	assert.Equal(t, 0, g.r.Pending())
	assert.Equal(t, 0, g.replica.Calls())
}

func TestManagerStopped(t *testing.T) {
	g := newRig(t, replicate.NewMemory(), false, replicate.Options{})
	g.m.Stop()
	res, err := g.r.Put(context.Background(), "a", []byte("1"))
	require.NoError(t, err)
	assert.ErrorIs(t, res.Cause, manager.ErrStopped)
	assert.Equal(t, 1, g.r.Pending())
}

package manager_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// halfOpen returns a half-open breaker with a 1s open period and a 1s probe
// timeout that trips on one failure.
func halfOpen(t *testing.T, name string) (*manager.Manager, *manager.Breaker, func(time.Duration)) {
	t.Helper()
	m, mock := startMock(t)
	b := register(t, m, name, manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: time.Second},
	})
	fail(t, b, 1)
	adv := func(d time.Duration) { advance(m, mock, d) }
	adv(time.Second)
	requireState(t, b, breaker.HalfOpen, "one open period after the trip")
	return m, b, adv
}

// Of many goroutines that ask a half-open breaker at once, exactly one gets
// the probe; every other one is declined with ErrOpen.
func TestExactlyOneProbe(t *testing.T) {
	const n = 1000
	m, b, _ := halfOpen(t, "race")
	var (
		start    = make(chan struct{})
		ready    sync.WaitGroup
		done     sync.WaitGroup
		probes   atomic.Int32
		declines atomic.Int32
		others   atomic.Int32
		permits  = make([]manager.Permit, n)
	)
	for i := range n {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			p, err := b.Acquire(context.Background())
			switch {
			case err == nil && p.Probe():
				probes.Add(1)
				permits[i] = p
			case errors.Is(err, breaker.ErrOpen):
				declines.Add(1)
			default:
				others.Add(1)
				permits[i] = p
			}
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()

	require.Equal(t, int32(1), probes.Load(), "probes")
	assert.Equal(t, int32(n-1), declines.Load(), "declined with ErrOpen")
	assert.Zero(t, others.Load(), "neither probe nor ErrOpen")
	requireState(t, b, breaker.Probing, "with the probe in flight")
	m.Sync()
	st := b.Stats()
	assert.Equal(t, uint64(n-1), st.Declined)

	for _, p := range permits {
		p.Release(nil) // the zero permits do nothing; the probe closes
	}
	requireState(t, b, breaker.Closed, "after the probe succeeded")
}

// Many half-open periods in a row: each time, exactly one of the racing
// callers probes.
func TestExactlyOneProbeRepeatedly(t *testing.T) {
	const callers = 64
	m, b, adv := halfOpen(t, "rounds")
	for round := range 50 {
		var wg sync.WaitGroup
		var probes atomic.Int32
		var won manager.Permit
		start := make(chan struct{})
		for range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if p, err := b.Acquire(context.Background()); err == nil && p.Probe() {
					probes.Add(1)
					won = p
				}
			}()
		}
		close(start)
		wg.Wait()
		require.Equal(t, int32(1), probes.Load(), "round %d", round)
		won.Release(errBoom)
		requireState(t, b, breaker.Open, "after the failed probe")
		m.Sync()
		adv(time.Second)
	}
}

// A probe released with Ignore gives its slot back: the next Acquire
// becomes the probe.
func TestProbeIgnoredFreesTheSlot(t *testing.T) {
	for _, release := range []struct {
		name string
		do   func(manager.Permit)
	}{
		{"ReleaseOutcome", func(p manager.Permit) { p.ReleaseOutcome(classify.Ignore) }},
		{"Release(context.Canceled)", func(p manager.Permit) { p.Release(context.Canceled) }},
	} {
		t.Run(release.name, func(t *testing.T) {
			m, b, adv := halfOpen(t, "ignore")
			p := probe(t, b)
			declined(t, b)
			release.do(p)
			requireState(t, b, breaker.HalfOpen, "after the probe was ignored")
			m.Sync()
			// No timer runs in half_open: it waits for the next caller.
			adv(time.Hour)
			requireState(t, b, breaker.HalfOpen, "an hour later")

			next := probe(t, b)
			declined(t, b)
			next.Release(nil)
			requireState(t, b, breaker.Closed, "after the second probe succeeded")
			st := b.Stats()
			assert.Equal(t, uint64(1), st.Ignored)
			assert.Equal(t, uint64(0), st.Stale)
		})
	}
}

// A probe that outlives its probe timeout lets the next caller probe, and
// its late release, whatever the outcome, changes nothing but Stats.Stale.
func TestProbeTimedOutLateRelease(t *testing.T) {
	for _, o := range []classify.Outcome{classify.Success, classify.Failure, classify.Ignore} {
		t.Run(o.String(), func(t *testing.T) {
			m, b, adv := halfOpen(t, "late")
			slow := probe(t, b)
			m.Sync()
			adv(time.Second)
			requireState(t, b, breaker.HalfOpen, "when the probe timed out")

			next := probe(t, b)
			slow.ReleaseOutcome(o)
			requireState(t, b, breaker.Probing, "after the timed-out probe's late release")
			assert.Equal(t, uint64(1), b.Stats().Stale)

			next.Release(errBoom)
			requireState(t, b, breaker.Open, "after the second probe failed")
			st := b.Stats()
			assert.Equal(t, uint64(1), st.Stale)
			m.Sync()
		})
	}
}

// A late release while the breaker is still half_open (nobody has taken the
// new probe yet) changes nothing either.
func TestProbeTimedOutReleasedInHalfOpen(t *testing.T) {
	_, b, adv := halfOpen(t, "late")
	slow := probe(t, b)
	adv(time.Second)
	slow.Release(nil)
	requireState(t, b, breaker.HalfOpen, "the timed-out probe's success must not close the breaker")
	assert.Equal(t, uint64(1), b.Stats().Stale)
	probe(t, b).Release(nil)
	requireState(t, b, breaker.Closed, "after a current probe succeeded")
}

// A permit granted in closed before the breaker tripped and recovered is
// stale: its failure does not count toward the strategy of the new closed
// period.
func TestEarlierGenerationReleaseNeverCounts(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "gen", manager.Config{
		Strategy: breaker.Consecutive{Failures: 2},
		Recover:  recover.BasicTimeout{Open: time.Second},
	})
	ctx := context.Background()
	old := make([]manager.Permit, 3)
	for i := range old {
		p, err := b.Acquire(ctx)
		require.NoError(t, err)
		old[i] = p
	}
	fail(t, b, 2)
	requireState(t, b, breaker.Open, "after two failures")
	old[0].Release(errBoom) // stale while open
	advance(m, mock, time.Second)
	probe(t, b).Release(nil)
	requireState(t, b, breaker.Closed, "after recovery")

	fail(t, b, 1)
	old[1].Release(errBoom)
	old[2].ReleaseOutcome(classify.Failure)
	requireState(t, b, breaker.Closed, "old permits' failures must not count toward the new period")
	st := b.Stats()
	assert.Equal(t, uint64(3), st.Stale)
	assert.Equal(t, uint64(6), st.Failures, "stale releases are still counted by outcome")

	fail(t, b, 1)
	requireState(t, b, breaker.Open, "after two current failures")
}

// A success from an earlier generation does not reset the new period's
// count either.
func TestEarlierGenerationSuccessDoesNotReset(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "gen", manager.Config{
		Strategy: breaker.Consecutive{Failures: 2},
		Recover:  recover.BasicTimeout{Open: time.Second},
	})
	old, err := b.Acquire(context.Background())
	require.NoError(t, err)
	fail(t, b, 2)
	advance(m, mock, time.Second)
	probe(t, b).Release(nil)
	fail(t, b, 1)
	old.Release(nil)
	fail(t, b, 1)
	requireState(t, b, breaker.Open, "a stale success must not reset the count")
}

// A probe granted before a Reset is stale after it.
func TestProbeStaleAfterReset(t *testing.T) {
	_, b, _ := halfOpen(t, "reset")
	p := probe(t, b)
	require.NoError(t, b.Reset())
	p.Release(errBoom)
	requireState(t, b, breaker.Closed, "a stale probe's failure must not re-open the breaker")
	assert.Equal(t, uint64(1), b.Stats().Stale)
}

// A caller whose context is done does not take the probe slot.
func TestProbeNotTakenWithDoneContext(t *testing.T) {
	_, b, _ := halfOpen(t, "ctx")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := b.Acquire(ctx)
	require.ErrorIs(t, err, context.Canceled)
	requireState(t, b, breaker.HalfOpen, "after a canceled caller")
	ran := false
	err = b.Do(ctx, func(context.Context) error { ran = true; return nil })
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, ran)
	probe(t, b).Release(nil)
}

// Do releases a panicking probe as a failure and lets the panic go on.
func TestDoPanicReleasesAsFailure(t *testing.T) {
	_, b, _ := halfOpen(t, "panic")
	assert.PanicsWithValue(t, "kaboom", func() {
		_ = b.Do(context.Background(), func(context.Context) error { panic("kaboom") })
	})
	requireState(t, b, breaker.Open, "after the probe panicked")
	assert.Equal(t, uint64(2), b.Stats().Failures, "the trip and the panicking probe")
}

func TestCallPanicReleasesAsFailure(t *testing.T) {
	m, _ := startMock(t)
	b := register(t, m, "panic", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	assert.PanicsWithValue(t, "kaboom", func() {
		_, _ = manager.Call(context.Background(), b, func(context.Context) (string, error) { panic("kaboom") })
	})
	requireState(t, b, breaker.Open, "after the call panicked")
}

package manager_test

import (
	"context"
	"errors"
	"strings"
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
	"github.com/fusebox-go/fusebox/store"
)

// Every Config Register rejects, Reconfigure rejects with the same error
// (but for the verb), and the breaker goes on as it was.
func TestReconfigureValidatesAsRegister(t *testing.T) {
	m, _ := startMock(t)
	for _, c := range invalidConfigs {
		t.Run(c.name, func(t *testing.T) {
			_, regErr := m.Register(c.name, c.cfg)
			require.Error(t, regErr)
			b := register(t, m, c.name, manager.Config{Strategy: breaker.Consecutive{Failures: 2}})
			fail(t, b, 1)

			err := b.Reconfigure(c.cfg)
			require.Error(t, err, "Reconfigure(%+v)", c.cfg)
			want := strings.Replace(regErr.Error(), "fusebox: register breaker", "fusebox: reconfigure breaker", 1)
			assert.Equal(t, want, err.Error(), "the same error as Register's")
			assert.Contains(t, err.Error(), c.field)
			var regCE, ce *breaker.ConfigError
			if errors.As(regErr, &regCE) {
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, regCE, ce)
			}

			fail(t, b, 1)
			requireState(t, b, breaker.Open, "the old strategy still counts: 2 failures trip")
		})
	}
	_, err := m.Register("", manager.Config{})
	require.Error(t, err)
}

func TestReconfigureStrategyFreshWindow(t *testing.T) {
	m, _ := startMock(t)
	ch, stop := m.Subscribe(16)
	defer stop()
	b := register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 2}})
	fail(t, b, 1)
	inFlight, err := b.Acquire(context.Background())
	require.NoError(t, err)
	gen := b.Snapshot().Gen

	require.NoError(t, b.Reconfigure(manager.Config{Strategy: breaker.Consecutive{Failures: 3}}))
	m.Sync()
	evs := drain(ch)
	require.Len(t, evs, 1)
	assert.Equal(t, manager.Event{Kind: manager.EventReconfigured, Name: "svc", At: evs[0].At, Gen: gen + 1}, evs[0],
		"not a transition, in the fresh window's generation")

	inFlight.Release(errBoom)
	assert.Equal(t, uint64(1), b.Stats().Stale, "a release from before the change lands in the old window: stale")
	fail(t, b, 2)
	requireState(t, b, breaker.Closed, "2 failures of 3 in the fresh window: the one before does not count")
	fail(t, b, 1)
	requireState(t, b, breaker.Open, "the third trips")
}

func TestReconfigureSameStrategyKeepsTheCount(t *testing.T) {
	m, _ := startMock(t)
	b := register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 2}})
	fail(t, b, 1)
	gen := b.Snapshot().Gen
	require.NoError(t, b.Reconfigure(manager.Config{Strategy: breaker.Consecutive{Failures: 2}, Classify: classify.Default}))
	assert.Equal(t, gen, b.Snapshot().Gen, "the same strategy: no new window")
	fail(t, b, 1)
	requireState(t, b, breaker.Open, "the failure before the change still counts")
}

func TestReconfigureWhileOpen(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "svc", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: 10 * time.Second},
	})
	fail(t, b, 1)
	m.Sync()
	until := b.Snapshot().Until

	require.NoError(t, b.Reconfigure(manager.Config{
		Strategy: breaker.Consecutive{Failures: 2},
		Recover:  recover.BasicTimeout{Open: time.Minute},
	}))
	requireState(t, b, breaker.Open, "an open breaker stays open")
	assert.Equal(t, until, b.Snapshot().Until, "the running timer keeps its length")
	advance(m, mock, 10*time.Second)
	p := probe(t, b)
	p.Release(nil)
	requireState(t, b, breaker.Closed, "the probe closed it")

	fail(t, b, 1)
	requireState(t, b, breaker.Closed, "the new strategy counts the next closed period: 1 of 2")
	fail(t, b, 1)
	requireState(t, b, breaker.Open, "2 of 2")
	m.Sync()
	assert.Equal(t, mock.Now().Add(time.Minute), b.Snapshot().Until, "the new Recover rules the next timer")
}

func TestReconfigureRecoverIsInited(t *testing.T) {
	m, mock := startMock(t)
	var inits atomic.Int32
	periods := func(d time.Duration) recover.Recover {
		return recover.Func(func() (int, error) { inits.Add(1); return 0, nil },
			func(c recover.Context, n int) (time.Duration, int) { return d * time.Duration(n+1), n + 1 })
	}
	b := register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: periods(time.Second)})
	require.Equal(t, int32(1), inits.Load())
	fail(t, b, 1)
	m.Sync()
	assert.Equal(t, mock.Now().Add(time.Second), b.Snapshot().Until)

	require.NoError(t, b.Reconfigure(manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: periods(time.Hour)}))
	assert.Equal(t, int32(2), inits.Load(), "the new Recover is Init-ed")
	advance(m, mock, time.Second)
	p := probe(t, b)
	p.Release(errBoom)
	m.Sync()
	// The probe's own timer and the reopening both went to the new
	// Recover, from its initial state: 1h for the probe, 2h open.
	assert.Equal(t, mock.Now().Add(2*time.Hour), b.Snapshot().Until, "the new Recover, from its initial state")
}

func TestReconfigureRecoverInitFails(t *testing.T) {
	m, _ := startMock(t)
	b := register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 2}})
	fail(t, b, 1)
	bad := recover.Func(func() (int, error) { return 0, errors.New("no") },
		func(recover.Context, int) (time.Duration, int) { return time.Second, 0 })
	err := b.Reconfigure(manager.Config{Strategy: breaker.Consecutive{Failures: 5}, Recover: bad})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `fusebox: reconfigure breaker "svc": Config.Recover: `)
	fail(t, b, 1)
	requireState(t, b, breaker.Open, "nothing changed: the old strategy trips on the second failure")
}

func TestReconfigureClassifierTakesTheNextRelease(t *testing.T) {
	m, _ := startMock(t)
	b := register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	inFlight, err := b.Acquire(context.Background())
	require.NoError(t, err)
	ignoreBoom := func(err error) classify.Outcome {
		if errors.Is(err, errBoom) {
			return classify.Ignore
		}
		return classify.Default(err)
	}
	require.NoError(t, b.Reconfigure(manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Classify: ignoreBoom}))
	inFlight.Release(errBoom)
	assert.Equal(t, uint64(1), b.Stats().Ignored, "the call in flight is classified by the new Classifier")
	fail(t, b, 3)
	requireState(t, b, breaker.Closed, "errBoom is ignored now")

	require.NoError(t, b.Reconfigure(manager.Config{Strategy: breaker.Consecutive{Failures: 1}}))
	release(t, b, nil)
	assert.Equal(t, uint64(1), b.Stats().Successes, "back to classify.Default: nil is a success")
	fail(t, b, 1)
	requireState(t, b, breaker.Open, "and errBoom a failure")
}

func TestReconfigureCannotChange(t *testing.T) {
	m, mock := startMock(t)
	mem, other := store.NewMemory(mock), store.NewMemory(mock)
	local := register(t, m, "local", manager.Config{})
	shared := register(t, m, "shared", manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Store: mem})
	cases := []struct {
		b     *manager.Breaker
		cfg   manager.Config
		field string
	}{
		{local, manager.Config{Store: mem}, "Config.Store"},
		{shared, manager.Config{Strategy: breaker.Consecutive{Failures: 3}}, "Config.Store"},
		{shared, manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Store: other}, "Config.Store"},
		{shared, manager.Config{Strategy: breaker.TimeWindow{Rate: 0.5, Period: time.Second, MinCalls: 1}, Store: mem}, "Config.Strategy"},
		{shared, manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Store: mem, Fallback: store.FailOpen}, "Config.Fallback"},
	}
	for _, c := range cases {
		err := c.b.Reconfigure(c.cfg)
		require.Error(t, err, "%s: Reconfigure(%+v)", c.b.Name(), c.cfg)
		assert.Contains(t, err.Error(), `fusebox: reconfigure breaker "`+c.b.Name()+`": `+c.field+": cannot change")
	}
	assert.NoError(t, local.Reconfigure(manager.Config{Fallback: store.FailOpen}), "Fallback is ignored without a Store")
	assert.NoError(t, shared.Reconfigure(manager.Config{
		Strategy: breaker.Consecutive{Failures: 3}, Store: mem, Recover: recover.BasicTimeout{Open: time.Minute},
	}), "a shared breaker may change its Recover and Classifier")
}

func TestReconfigureLogs(t *testing.T) {
	var logs logBuffer
	m := manager.Start(manager.Options{Logger: logs.logger()})
	defer m.Stop()
	b := register(t, m, "svc", manager.Config{})
	require.NoError(t, b.Reconfigure(manager.Config{Strategy: breaker.Consecutive{Failures: 9}}))
	recs := logs.find(t, "fusebox: breaker reconfigured")
	require.Len(t, recs, 1)
	assert.Equal(t, "svc", recs[0]["breaker"])
	assert.Equal(t, "breaker.Consecutive{Failures:9}", recs[0]["strategy"])
	assert.Equal(t, true, recs[0]["fresh_window"])
}

func TestReconfigureAfterStop(t *testing.T) {
	m, _ := startMock(t)
	b := register(t, m, "svc", manager.Config{})
	m.Stop()
	assert.ErrorIs(t, b.Reconfigure(manager.Config{}), manager.ErrStopped)
}

// TestReconfigureUnderLoad changes strategy, between count-based and
// time-based ones, and classifier while callers go on (run with -race):
// every call is admitted or declined, never lost, and the breaker ends in
// the last configuration.
func TestReconfigureUnderLoad(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 1000}})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var calls atomic.Uint64
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				err := b.Do(context.Background(), func(context.Context) error {
					if (i+g)%3 == 0 {
						return errBoom
					}
					return nil
				})
				calls.Add(1)
				if err != nil && !errors.Is(err, errBoom) && !errors.Is(err, breaker.ErrOpen) {
					t.Errorf("Do: %v", err)
					return
				}
			}
		}()
	}
	strategies := []breaker.Strategy{
		breaker.TimeWindow{Rate: 0.9, Period: time.Minute, MinCalls: 100},
		breaker.FailureRate{Rate: 0.9, Window: 100, MinCalls: 100},
		breaker.Consecutive{Failures: 1000},
	}
	for i := range 60 {
		cfg := manager.Config{Strategy: strategies[i%len(strategies)]}
		if i%2 == 1 {
			cfg.Classify = func(err error) classify.Outcome { return classify.Default(err) }
		}
		require.NoError(t, b.Reconfigure(cfg))
		if b.State() != breaker.Closed {
			require.NoError(t, b.Reset())
		}
		mock.Add(time.Second)
	}
	close(stop)
	wg.Wait()
	s := b.Stats()
	assert.Equal(t, calls.Load(), s.Calls, "every call was counted once")
	require.NoError(t, b.Reset())
	fail(t, b, 999)
	requireState(t, b, breaker.Closed, "the last strategy, Consecutive{1000}")
	fail(t, b, 1)
	requireState(t, b, breaker.Open, "trips on the 1000th")
}

func TestReconfigureSlowCall(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	untimed, err := b.Acquire(context.Background())
	require.NoError(t, err)
	require.NoError(t, b.Reconfigure(manager.Config{Strategy: breaker.Consecutive{Failures: 1}, SlowCall: time.Second}))
	timed, err := b.Acquire(context.Background())
	require.NoError(t, err)
	mock.Add(2 * time.Second)
	untimed.Release(nil)
	assert.Zero(t, b.Stats().SlowCalls, "a call acquired before SlowCall was set is not timed")
	requireState(t, b, breaker.Closed, "its success counts as one")
	timed.Release(nil)
	assert.Equal(t, uint64(1), b.Stats().SlowCalls, "a call acquired after is timed")
	requireState(t, b, breaker.Open, "and the slow call trips the breaker")
}

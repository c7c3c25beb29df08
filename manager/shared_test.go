package manager_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

// watched wraps a real store to count the calls that reach it, to record
// the verdicts it gives, and to cut it off (every call fails) on demand.
type watched struct {
	store.Store
	calls    atomic.Int64
	cut      atomic.Bool
	watching atomic.Bool // a watch subscribed, which cutting the store does not end
	mu       sync.Mutex
	verdicts []int64
	reported int64 // failures RecordFailure was given, for the verdicts
}

var errCut = errors.New("store cut off by the test")

func (w *watched) RecordFailure(ctx context.Context, name string, p store.Policy, failures int64, n []int64) (store.Verdict, error) {
	w.calls.Add(1)
	if w.cut.Load() {
		return store.Verdict{}, errCut
	}
	v, err := w.Store.RecordFailure(ctx, name, p, failures, n)
	if err == nil {
		w.mu.Lock()
		w.verdicts = append(w.verdicts, v.Failures)
		w.reported += failures
		w.mu.Unlock()
	}
	return v, err
}

func (w *watched) RecordSuccess(ctx context.Context, name string, p store.Policy, n []int64) (store.Verdict, error) {
	w.calls.Add(1)
	if w.cut.Load() {
		return store.Verdict{}, errCut
	}
	return w.Store.RecordSuccess(ctx, name, p, n)
}

func (w *watched) Open(ctx context.Context, name string, epoch uint64, d time.Duration, why store.Reason) (store.Status, bool, error) {
	w.calls.Add(1)
	if w.cut.Load() {
		return store.Status{}, false, errCut
	}
	return w.Store.Open(ctx, name, epoch, d, why)
}

func (w *watched) AcquireProbe(ctx context.Context, name, token string, epoch uint64, lease time.Duration) (bool, store.Status, error) {
	w.calls.Add(1)
	if w.cut.Load() {
		return false, store.Status{}, errCut
	}
	return w.Store.AcquireProbe(ctx, name, token, epoch, lease)
}

func (w *watched) Resolve(ctx context.Context, name, token string, epoch uint64, o classify.Outcome, d time.Duration, why store.Reason) (store.Status, bool, error) {
	w.calls.Add(1)
	if w.cut.Load() {
		return store.Status{}, false, errCut
	}
	return w.Store.Resolve(ctx, name, token, epoch, o, d, why)
}

func (w *watched) Reset(ctx context.Context, name string) (store.Status, error) {
	w.calls.Add(1)
	if w.cut.Load() {
		return store.Status{}, errCut
	}
	return w.Store.Reset(ctx, name)
}

func (w *watched) ForceOpen(ctx context.Context, name string) (store.Status, error) {
	w.calls.Add(1)
	if w.cut.Load() {
		return store.Status{}, errCut
	}
	return w.Store.ForceOpen(ctx, name)
}

func (w *watched) Status(ctx context.Context, names []string) ([]store.Status, error) {
	if w.cut.Load() {
		return nil, errCut
	}
	return w.Store.Status(ctx, names)
}

func (w *watched) Watch(ctx context.Context, ready func(), fn func(store.Change)) error {
	if w.cut.Load() {
		return errCut
	}
	return w.Store.Watch(ctx, func() { w.watching.Store(true); ready() }, fn)
}

// fleet starts n managers on one mock clock, each with a breaker "svc"
// shared through st.
func fleet(t *testing.T, n int, mock *clock.Mock, st store.Store, cfg manager.Config) ([]*manager.Manager, []*manager.Breaker) {
	t.Helper()
	cfg.Store = st
	var ms []*manager.Manager
	var bs []*manager.Breaker
	for range n {
		m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, Resync: time.Hour})
		t.Cleanup(m.Stop)
		ms = append(ms, m)
		bs = append(bs, register(t, m, "svc", cfg))
	}
	return ms, bs
}

// syncAll syncs every manager: on the memory store a change one of them
// made is applied in every other once that one's Sync returned and then the
// other's has.
//
// It makes two passes: in the first, every store call a manager's loop
// started (a trip's opening, a probe's failed verdict) completes and its
// change reaches the other managers; in the second, every manager applies
// what it heard. Following what it hears starts no store call.
func syncAll(ms []*manager.Manager) {
	for range 2 {
		for _, m := range ms {
			m.Sync()
		}
	}
}

func allIn(bs []*manager.Breaker, st breaker.State) func() bool {
	return func() bool {
		for _, b := range bs {
			if b.State() != st {
				return false
			}
		}
		return true
	}
}

// Four managers with fifty goroutines each fail at once against one shared
// Consecutive{Failures: 1000}: each manager has one failure report in
// flight at a time and folds the failures released meanwhile into its
// next one, the store counts every failure reported once (its counts
// rise by each report's failures, none lost or repeated), the breaker
// opens on the 1,000th failure, and what got through after it is only
// what was already in flight.
func TestSharedNoLostCounts(t *testing.T) {
	mock := clock.NewMock()
	st := &watched{Store: store.NewMemory(mock)}
	ms, bs := fleet(t, 4, mock, st, manager.Config{
		Strategy: breaker.Consecutive{Failures: 1000},
		Recover:  recover.BasicTimeout{Open: time.Minute},
	})
	var wg sync.WaitGroup
	var made atomic.Int64
	start := make(chan struct{})
	for _, b := range bs {
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for {
					p, err := b.Acquire(context.Background())
					if err != nil {
						require.ErrorIs(t, err, breaker.ErrOpen)
						return
					}
					made.Add(1)
					p.Release(errBoom)
				}
			}()
		}
	}
	close(start)
	wg.Wait()

	st.mu.Lock()
	counts := slices.Clone(st.verdicts)
	reported := st.reported
	st.mu.Unlock()
	slices.Sort(counts)
	var stale uint64
	for _, b := range bs {
		stale += b.Stats().Stale
	}
	require.NotEmpty(t, counts)
	for i := 1; i < len(counts); i++ {
		require.Less(t, counts[i-1], counts[i], "the store's counts rise with every report, none repeated")
	}
	assert.Equal(t, reported, counts[len(counts)-1], "the store counted every failure reported, once")
	// Failures released before the trip but folded after the report that
	// tripped are not reported: at most one per caller.
	notReported := made.Load() - int64(stale) - reported
	assert.GreaterOrEqual(t, notReported, int64(0))
	assert.LessOrEqual(t, notReported, int64(4*50), "only failures in flight at the trip were not reported")
	assert.GreaterOrEqual(t, reported, int64(1000))
	assert.LessOrEqual(t, reported, int64(1000+4*50), "after the 1,000th failure only calls already in flight may fail")
	syncAll(ms)
	assert.True(t, allIn(bs, breaker.Open)(), "every manager is open")
}

// Four managers, one goroutine each, call a failing service through a
// shared Consecutive{Failures: 5}: the service sees at most 5 + 4 calls
// before every one of them declines. Four unshared breakers let 20 through.
func TestSharedFleetTripsTogether(t *testing.T) {
	run := func(t *testing.T, shared bool) int64 {
		mock := clock.NewMock()
		var hits atomic.Int64
		service := func(context.Context) error { hits.Add(1); return errBoom }
		cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 5}, Recover: recover.BasicTimeout{Open: time.Minute}}
		var bs []*manager.Breaker
		if shared {
			_, bs = fleet(t, 4, mock, store.NewMemory(mock), cfg)
		} else {
			for range 4 {
				m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger})
				t.Cleanup(m.Stop)
				bs = append(bs, register(t, m, "svc", cfg))
			}
		}
		var wg sync.WaitGroup
		for _, b := range bs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for declined := 0; declined < 3; {
					if err := b.Do(context.Background(), service); errors.Is(err, breaker.ErrOpen) {
						declined++
					}
				}
			}()
		}
		wg.Wait()
		return hits.Load()
	}
	shared := run(t, true)
	assert.GreaterOrEqual(t, shared, int64(5))
	assert.LessOrEqual(t, shared, int64(5+4), "calls reaching the service through a shared breaker")
	assert.Equal(t, int64(20), run(t, false), "calls reaching the service through four unshared breakers")
}

// When the open period ends, four managers with fifty goroutines each make
// exactly one trial call between them; its success closes every breaker.
func TestSharedOneProbe(t *testing.T) {
	mock := clock.NewMock()
	ms, bs := fleet(t, 4, mock, store.NewMemory(mock), manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: time.Minute},
	})
	fail(t, bs[0], 1)
	syncAll(ms)
	require.True(t, allIn(bs, breaker.Open)(), "every manager is open")
	mock.Add(time.Second + maxLag)
	for _, m := range ms {
		m.Sync()
	}
	require.True(t, allIn(bs, breaker.HalfOpen)(), "every manager is half-open once the open period and the lags are over")

	var trials atomic.Int64
	release := make(chan struct{})
	service := func(context.Context) error {
		trials.Add(1)
		<-release
		return nil
	}
	var wg sync.WaitGroup
	var declined atomic.Int64
	start := make(chan struct{})
	var probeDone sync.WaitGroup
	for _, b := range bs {
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				p, err := b.Acquire(context.Background())
				if err != nil {
					require.ErrorIs(t, err, breaker.ErrOpen)
					declined.Add(1)
					return
				}
				probeDone.Add(1)
				go func() {
					defer probeDone.Done()
					p.Release(service(context.Background()))
				}()
			}()
		}
	}
	close(start)
	wg.Wait()
	assert.Equal(t, int64(4*50-1), declined.Load(), "everyone but one caller is declined")
	eventually(t, "the trial call started", func() bool { return trials.Load() == 1 })
	close(release)
	probeDone.Wait()
	assert.Equal(t, int64(1), trials.Load(), "trial calls made by the fleet")
	syncAll(ms)
	assert.True(t, allIn(bs, breaker.Closed)(), "every manager closed after the probe")
}

// A call through a healthy shared breaker never reaches the store.
func TestSharedHealthyCallsStayLocal(t *testing.T) {
	mock := clock.NewMock()
	st := &watched{Store: store.NewMemory(mock)}
	ms, bs := fleet(t, 2, mock, st, manager.Config{Strategy: breaker.Consecutive{Failures: 5}})
	syncAll(ms)
	before := st.calls.Load()
	for i := range 10_000 {
		require.NoError(t, bs[i%2].Do(context.Background(), func(context.Context) error { return nil }))
	}
	assert.Equal(t, before, st.calls.Load(), "store calls made by 10,000 healthy calls")

	// One failure costs one store call, and the first success after it one
	// more (it ends the shared run of failures); later successes none.
	release(t, bs[0], errBoom)
	release(t, bs[0], nil)
	release(t, bs[0], nil)
	assert.Equal(t, before+2, st.calls.Load())
}

// The process that opens the breaker decides the open period; the others
// follow the period the store holds, whatever their own Recover says, and
// turn half-open their lag after it.
func TestSharedOpenerDecidesThePeriod(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	ms, bs := fleet(t, 1, mock, mem, manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: 2 * time.Second}})
	ms2, bs2 := fleet(t, 1, mock, mem, manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: 10 * time.Second}})
	t0 := mock.Now()
	fail(t, bs[0], 1)
	ms[0].Sync()
	ms2[0].Sync()
	require.Equal(t, breaker.Open, bs2[0].State(), "the second manager follows")
	assert.Equal(t, t0.Add(2*time.Second), bs[0].Snapshot().Until, "the opener's open period")
	assert.WithinRange(t, bs2[0].Snapshot().Until, t0.Add(2*time.Second+maxLag-30*time.Millisecond), t0.Add(2*time.Second+maxLag), "the follower's open period ends its lag after the opener's")
	mock.Add(2 * time.Second)
	ms[0].Sync()
	ms2[0].Sync()
	assert.Equal(t, breaker.HalfOpen, bs[0].State())
	assert.Equal(t, breaker.Open, bs2[0].State(), "the follower waits its lag")
	mock.Add(maxLag)
	ms2[0].Sync()
	assert.Equal(t, breaker.HalfOpen, bs2[0].State())
}

// A strategy no store can evaluate is refused at Register.
func TestSharedRefusesUnshareableStrategy(t *testing.T) {
	m, mock := startMock(t)
	_, err := m.Register("svc", manager.Config{
		Strategy: breaker.FailureRate{Rate: 0.5, Window: 100},
		Store:    store.NewMemory(mock),
	})
	require.ErrorIs(t, err, store.ErrNotShareable)
	assert.Contains(t, err.Error(), `"svc"`)
	assert.Contains(t, err.Error(), "Strategy")
}

// TimeWindow is shared too: the rate is over the calls of every process.
func TestSharedTimeWindow(t *testing.T) {
	mock := clock.NewMock()
	ms, bs := fleet(t, 2, mock, store.NewMemory(mock), manager.Config{
		Strategy: breaker.TimeWindow{Rate: 0.5, Period: 10 * time.Second, MinCalls: 4},
		Recover:  recover.BasicTimeout{Open: time.Minute},
	})
	release(t, bs[0], nil)
	release(t, bs[1], nil)
	release(t, bs[0], errBoom) // reports its one success with it: 2 calls, 1 failure
	assert.Equal(t, breaker.Closed, bs[0].State())
	release(t, bs[1], errBoom) // 4 calls, 2 failures: rate 0.5
	assert.Equal(t, breaker.Open, bs[1].State(), "the fleet's rate reached 0.5")
	syncAll(ms)
	assert.True(t, allIn(bs, breaker.Open)(), "the other manager follows")
}

// While the store is unreachable a shared breaker protects its process on
// its own state machine; when the store answers again the breaker tells the
// fleet what it decided meanwhile.
func TestSharedFallbackLocal(t *testing.T) {
	mock := clock.NewMock()
	st := &watched{Store: store.NewMemory(mock)}
	m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, Resync: time.Second})
	t.Cleanup(m.Stop)
	events, cancel := m.Subscribe(64)
	defer cancel()
	b := register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Store: st, Recover: recover.BasicTimeout{Open: time.Minute}})
	// Sync returns once the watch has subscribed: one that started while
	// the store is cut would fail, wait for the mock clock to try again,
	// and take the store down again after the resync below found it back.
	m.Sync()
	require.True(t, st.watching.Load(), "the watch subscribed")

	st.cut.Store(true)
	fail(t, b, 1) // the store call fails: the fallback takes over
	m.Sync()
	assert.True(t, b.Stats().StoreDown)
	fail(t, b, 2) // counted locally: 3 in a row trips
	require.Equal(t, breaker.Open, b.State())
	m.Sync()
	ev := <-events
	assert.Equal(t, manager.EventStoreLost, ev.Kind)
	assert.Zero(t, ev.Transition, "losing the store is not a transition")
	ev = <-events
	assert.Equal(t, breaker.Transition{From: breaker.Closed, To: breaker.Open}, ev.Transition)

	st.cut.Store(false)
	mock.Add(time.Second) // the next resync finds the store again
	m.Sync()
	require.False(t, b.Stats().StoreDown, "the store is back")
	s, err := st.Status(context.Background(), []string{"svc"})
	require.NoError(t, err)
	require.Positive(t, s[0].Open, "the local opening reached the store")
	ev = <-events
	assert.Equal(t, manager.EventStoreRestored, ev.Kind)
	assert.Zero(t, ev.Transition, "regaining the store is not a transition")
}

// With FailOpen an unreachable store lets every call through; with
// FailClosed it declines every call.
func TestSharedFailOpenAndFailClosed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fallback store.Fallback
		want     breaker.State
	}{
		{"fail_open", store.FailOpen, breaker.Closed},
		{"fail_closed", store.FailClosed, breaker.Open},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mock := clock.NewMock()
			st := &watched{Store: store.NewMemory(mock)}
			m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, Resync: time.Second})
			t.Cleanup(m.Stop)
			b := register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Store: st, Fallback: tc.fallback})
			m.Sync() // the watch subscribed before the store is cut
			st.cut.Store(true)
			p, err := b.Acquire(context.Background())
			require.NoError(t, err)
			p.Release(errBoom)
			m.Sync()
			require.True(t, b.Stats().StoreDown)
			for range 10 {
				p, err := b.Acquire(context.Background())
				if tc.want == breaker.Closed {
					require.NoError(t, err)
					p.Release(errBoom)
				} else {
					require.ErrorIs(t, err, breaker.ErrOpen)
				}
			}
			assert.Equal(t, tc.want, b.State())
			st.cut.Store(false)
			mock.Add(time.Second)
			m.Sync()
			require.False(t, b.Stats().StoreDown, "the store is back")
			assert.Equal(t, breaker.Closed, b.State(), "the breaker follows the store again")
		})
	}
}

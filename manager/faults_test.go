package manager_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
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
	"github.com/fusebox-go/fusebox/store"
)

// slowRecover is BasicTimeout whose Timeout takes delay of real time.
type slowRecover struct {
	recover.BasicTimeout
	delay time.Duration
	calls atomic.Int32
}

func (r *slowRecover) Timeout(c recover.Context, state any) (time.Duration, any) {
	r.calls.Add(1)
	time.Sleep(r.delay) // the fault under test: a slow callback
	return r.BasicTimeout.Timeout(c, state)
}

// within runs f and fails the test if it has not returned after a few
// seconds: f must not wait for the manager.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s is still blocked after 5s", what)
	}
}

// A Recover.Timeout that takes 50ms, for ten breakers tripped at once,
// keeps the manager busy for half a second at each step: the breakers
// decline calls at once all the same, and once the manager catches up
// every timer is there, due when Recover said, counted from the
// transition and not from when Recover answered.
func TestFaultSlowRecoverLosesNoTimer(t *testing.T) {
	m, mock := startMock(t)
	const n = 10
	recs := make([]*slowRecover, n)
	bs := make([]*manager.Breaker, n)
	for i := range bs {
		recs[i] = &slowRecover{BasicTimeout: recover.BasicTimeout{Open: time.Second, ProbeTimeout: 2 * time.Second}, delay: 50 * time.Millisecond}
		bs[i] = register(t, m, fmt.Sprintf("slow%d", i), manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recs[i]})
	}
	events, unsubscribe := m.Subscribe(1024)
	defer unsubscribe()
	t0 := mock.Now()

	var wg sync.WaitGroup
	for _, b := range bs {
		wg.Add(1)
		go func() { defer wg.Done(); release(t, b, errBoom) }()
	}
	wg.Wait()
	for _, b := range bs {
		requireState(t, b, breaker.Open, "right after its trip, before the manager has handled it")
	}
	m.Sync()
	for i, b := range bs {
		assert.Equal(t, t0.Add(time.Second), declined(t, b).Until, "%s: the open period ends 1s after the trip", b.Name())
		assert.Equal(t, int32(1), recs[i].calls.Load(), "%s: Recover was asked once", b.Name())
	}
	advance(m, mock, time.Second-time.Nanosecond)
	for _, b := range bs {
		requireState(t, b, breaker.Open, "1ns before the end of the open period")
	}
	advance(m, mock, time.Nanosecond)
	for _, b := range bs {
		requireState(t, b, breaker.HalfOpen, "at the end of the open period")
	}

	// Every probe starts a slow Timeout call; half of them fail and ask
	// for another.
	probes := make([]manager.Permit, n)
	for i, b := range bs {
		probes[i] = probe(t, b)
	}
	m.Sync()
	for i, p := range probes {
		p.Release([]error{nil, errBoom}[i%2])
	}
	m.Sync()
	advance(m, mock, time.Second)
	for i, b := range bs {
		want := []breaker.State{breaker.Closed, breaker.HalfOpen}[i%2]
		requireState(t, b, want, "a second after the probes")
		assert.Equal(t, int32(2+i%2), recs[i].calls.Load(), "%s: Timeout calls", b.Name())
	}
	paths := newPathChecker()
	got := drain(events)
	for _, e := range got {
		require.NoError(t, paths.feed(e))
	}
	assert.Len(t, got, n*4+n/2, "trip, timer, probe, verdict for each, and a timer for the failed probes")
	assert.Equal(t, n+n/2, paths.edges[pathEdge{breaker.Open, breaker.HalfOpen, breaker.CauseTimer}], "timers fired")
}

// The same on the real clock: a 50ms Timeout for ten breakers with a 5ms
// open period delays when the timers are seen to fire, but each fires
// exactly once, at the deadline counted from its trip.
func TestFaultSlowRecoverRealClock(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	m := manager.Start(manager.Options{Logger: quietLogger})
	defer m.Stop()
	const n = 10
	bs := make([]*manager.Breaker, n)
	for i := range bs {
		rec := &slowRecover{BasicTimeout: recover.BasicTimeout{Open: 5 * time.Millisecond, ProbeTimeout: time.Hour}, delay: 50 * time.Millisecond}
		bs[i] = register(t, m, fmt.Sprintf("slow%d", i), manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: rec})
	}
	events, _ := m.Subscribe(1024)
	start := time.Now()
	for _, b := range bs {
		release(t, b, errBoom)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, b := range bs {
		for b.State() != breaker.HalfOpen {
			require.True(t, time.Now().Before(deadline), "%s is still %v 10s after its trip", b.Name(), b.State())
			time.Sleep(time.Millisecond)
		}
	}
	seen := time.Since(start)
	m.Stop()
	trips := map[string]time.Time{}
	timers := map[string]int{}
	for e := range events {
		switch e.Cause {
		case breaker.CauseTrip:
			trips[e.Name] = e.At
		case breaker.CauseTimer:
			timers[e.Name]++
			assert.Equal(t, 5*time.Millisecond, e.At.Sub(trips[e.Name]), "%s: the timer is due 5ms after the trip", e.Name)
		default:
			t.Errorf("unexpected event %+v", e)
		}
	}
	for _, b := range bs {
		assert.Equal(t, 1, timers[b.Name()], "%s: timers fired", b.Name())
	}
	t.Logf("the last half_open was seen %v after the trips (ten 50ms Timeout calls)", seen)
	goleak.VerifyNone(t, leaks)
}

// blockingRecover blocks in Timeout, for the breaker named name, until
// unblock is closed.
type blockingRecover struct {
	recover.BasicTimeout
	entered chan struct{}
	unblock chan struct{}
	once    sync.Once
}

func (r *blockingRecover) Timeout(c recover.Context, state any) (time.Duration, any) {
	r.once.Do(func() { close(r.entered) })
	<-r.unblock
	return r.BasicTimeout.Timeout(c, state)
}

// While a Recover.Timeout call blocks the manager, callers of every
// breaker go on: calls through a closed breaker, a trip (declined at once
// from then on), a probe, ForceOpen and Reset, Stats; even more
// transitions than the manager's queue holds wait only until the callback
// returns. Then the manager catches up: every transition is published in
// order and every timer armed.
func TestFaultBlockedRecoverBlocksNoCaller(t *testing.T) {
	m, mock := startMock(t)
	open := recover.BasicTimeout{Open: time.Second, ProbeTimeout: time.Second}
	rec := &blockingRecover{BasicTimeout: open, entered: make(chan struct{}), unblock: make(chan struct{})}
	stuck := register(t, m, "stuck", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: rec})
	other := register(t, m, "other", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: open})
	half := register(t, m, "half", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: open})
	flappy := register(t, m, "flappy", manager.Config{})
	events, unsubscribe := m.Subscribe(1 << 14)
	defer unsubscribe()

	fail(t, half, 1)
	advance(m, mock, time.Second)
	requireState(t, half, breaker.HalfOpen, "before the manager blocks")
	fail(t, stuck, 1)
	<-rec.entered // the manager is inside Timeout from now on

	within(t, "calls through a closed breaker", func() {
		for range 10000 {
			release(t, other, nil)
		}
	})
	within(t, "a trip", func() { fail(t, other, 1) })
	requireState(t, other, breaker.Open, "tripped while the manager is blocked")
	declined(t, other)
	within(t, "a probe", func() { probe(t, half).Release(nil) })
	requireState(t, half, breaker.Closed, "after its probe")
	within(t, "Stats", func() { _ = stuck.Stats() })

	// More transitions than the manager's queue holds: the callers that
	// overflow it wait, and go on once the callback returns.
	const flips = 1500
	flipped := make(chan struct{})
	go func() {
		defer close(flipped)
		for range flips {
			assert.NoError(t, flappy.ForceOpen())
			assert.NoError(t, flappy.Reset())
		}
	}()
	close(rec.unblock)
	within(t, "transitions queued behind a blocked callback", func() { <-flipped })
	m.Sync()

	paths := newPathChecker()
	for _, e := range drain(events) {
		require.NoError(t, paths.feed(e))
	}
	assert.Equal(t, flips, paths.count("flappy", breaker.Closed, breaker.Open, breaker.CauseForceOpen))
	assert.Equal(t, flips, paths.count("flappy", breaker.Open, breaker.Closed, breaker.CauseReset))
	assert.Zero(t, flappy.Stats().DroppedEvents)
	assert.Equal(t, mock.Now().Add(time.Second), declined(t, stuck).Until, "stuck's timer is armed")
	assert.Equal(t, mock.Now().Add(time.Second), declined(t, other).Until, "other's timer is armed")
	advance(m, mock, time.Second)
	requireState(t, stuck, breaker.HalfOpen, "after its open period")
	requireState(t, other, breaker.HalfOpen, "after its open period")
}

// countingHandler is a slog.Handler that counts records by message.
type countingHandler struct {
	mu     sync.Mutex
	counts map[string]int
}

func newCountingLogger() (*slog.Logger, *countingHandler) {
	h := &countingHandler{counts: map[string]int{}}
	return slog.New(h), h
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *countingHandler) WithGroup(string) slog.Handler            { return h }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.counts[r.Message]++
	h.mu.Unlock()
	return nil
}

func (h *countingHandler) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[msg]
}

// flakyRecover is BasicTimeout whose Timeout panics at random once
// armed, one call in every, and whose Init panics on some restarts.
type flakyRecover struct {
	recover.BasicTimeout
	every    atomic.Int32 // 0: never panic
	initToo  bool
	mu       sync.Mutex
	rng      *rand.Rand
	panics   atomic.Int64
	initFail atomic.Int64
}

func newFlakyRecover(b recover.BasicTimeout, seed uint64, initToo bool) *flakyRecover {
	return &flakyRecover{BasicTimeout: b, rng: rand.New(rand.NewPCG(seed, 5)), initToo: initToo}
}

func (r *flakyRecover) roll() bool {
	n := r.every.Load()
	if n <= 0 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.IntN(int(n)) == 0
}

func (r *flakyRecover) Init() (any, error) {
	if r.initToo && r.roll() {
		r.initFail.Add(1)
		panic("flaky Init")
	}
	return r.BasicTimeout.Init()
}

func (r *flakyRecover) Timeout(c recover.Context, state any) (time.Duration, any) {
	if r.roll() {
		r.panics.Add(1)
		panic("flaky Timeout")
	}
	return r.BasicTimeout.Timeout(c, state)
}

// Panics in Recover.Timeout (and in Init on some restarts) while 64
// goroutines per breaker call through three breakers on the real clock:
// the manager restarts again and again mid-load, and every invariant of
// the stress test holds all the same (restarts only add the edges
// X->closed with cause restart), every timer armed after the last restart
// fires, and nothing is left after Stop.
func TestFaultRestartsUnderLoad(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	d := runLength(t, 1500*time.Millisecond, time.Minute)
	log, counts := newCountingLogger()
	m := manager.Start(manager.Options{Logger: log, MaxRestarts: 1 << 30})
	defer m.Stop()
	seed := uint64(time.Now().UnixNano())
	basic := recover.BasicTimeout{Open: 2 * time.Millisecond, ProbeTimeout: 3 * time.Millisecond}
	recs := []*flakyRecover{newFlakyRecover(basic, seed, false), newFlakyRecover(basic, seed+1, true), newFlakyRecover(basic, seed+2, false)}
	specs := []loadSpec{
		{name: "flaky", cfg: manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Recover: recs[0]}, slowProbe: true, failPct: 40},
		{name: "flaky-init", cfg: manager.Config{Strategy: breaker.FailureRate{Rate: 0.5, Window: 10, MinCalls: 5}, Recover: recs[1]}, failPct: 45},
		{name: "steady", cfg: manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Recover: recs[2]}, chaos: true, failPct: 40},
	}
	for i := range specs {
		specs[i].minOpen, specs[i].minProbe, specs[i].exact = basic.Open, basic.ProbeTimeout, true
	}
	l := startLoad(t, m, leaks, specs, 64)
	for _, r := range recs[:2] {
		r.every.Store(12)
	}
	l.run(d)
	for _, r := range recs {
		r.every.Store(0)
	}
	require.NoError(t, l.breakers[2].b.Reset())
	select {
	case <-m.Done():
		t.Fatal("the manager stopped")
	default:
	}
	// After the panics, a breaker still trips and recovers.
	l.settle()
	lb := l.breakers[0]
	require.NoError(t, lb.b.Reset())
	for range 3 {
		require.NoError(t, l.once(lb, errBoom))
	}
	requireState(t, lb.b, breaker.Open, "a trip after the restarts")
	l.settle()

	restarts := counts.count(msgRestarted)
	panics := recs[0].panics.Load() + recs[1].panics.Load()
	assert.Positive(t, restarts, "restarts")
	assert.Equal(t, int(panics), counts.count(msgPanic), "every panic is logged")
	assert.Equal(t, int(panics), restarts, "every panic restarted the manager")
	assert.Equal(t, int(recs[1].initFail.Load()), counts.count(msgInitFail), "every Init that failed on a restart is logged")
	fig := l.finish()
	// Every breaker restarted closed each time: the restart edges.
	for _, lb := range l.breakers {
		n := 0
		for _, from := range []breaker.State{breaker.Open, breaker.HalfOpen, breaker.Probing} {
			n += l.paths.count(lb.spec.name, from, breaker.Closed, breaker.CauseRestart)
		}
		assert.LessOrEqual(t, n, restarts, "%s: restart events", lb.spec.name)
	}
	t.Logf("%d restarts (%d of them with a failing Init) under load", restarts, recs[1].initFail.Load())
	reportFigures(t, "restarts", d, fig, restarts)
}

// The restart limit reached under load: three breakers with 64 callers
// each, and Recover.Timeout panics at every call from some point on. The
// third panic within the window stops the manager for good: every caller
// then gets ErrStopped and returns by itself (none is left blocked), every
// other method says ErrStopped, the counts add up to the last call, the
// log says why once, and nothing is left running.
func TestFaultRestartLimitUnderLoad(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	log, counts := newCountingLogger()
	m := manager.Start(manager.Options{Logger: log, MaxRestarts: 3, RestartWindow: time.Minute})
	defer m.Stop()
	basic := recover.BasicTimeout{Open: 2 * time.Millisecond, ProbeTimeout: time.Hour}
	recs := make([]*flakyRecover, 3)
	var specs []loadSpec
	for i := range recs {
		recs[i] = newFlakyRecover(basic, uint64(i), false)
		specs = append(specs, loadSpec{
			name:    fmt.Sprintf("doomed%d", i),
			cfg:     manager.Config{Strategy: breaker.Consecutive{Failures: 2}, Recover: recs[i]},
			chaos:   i == 2,
			minOpen: basic.Open, minProbe: basic.ProbeTimeout, exact: true,
			failPct: 40,
		})
	}
	const workers = 64
	l := startLoad(t, m, leaks, specs, workers)
	waitFor(t, 5*time.Second, "the load to trip every breaker", func() bool {
		for _, lb := range l.breakers {
			if l.pathsCount(lb.spec.name, breaker.Closed, breaker.Open, breaker.CauseTrip) == 0 {
				return false
			}
		}
		return true
	})
	l.runFor(300 * time.Millisecond)
	for _, r := range recs {
		r.every.Store(1)
	}
	select {
	case <-m.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the manager has not stopped 10s after Recover began to panic at every call")
	}
	// The callers return by themselves: each gets ErrStopped at its next
	// Acquire.
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		l.stopCallers() // fails, with the stacks
	}
	close(l.stop)

	for _, lb := range l.breakers {
		b := lb.b
		assert.Equal(t, int64(workers), lb.stopped.Load(), "%s: each caller got ErrStopped once, and returned", b.Name())
		_, err := b.Acquire(context.Background())
		assert.ErrorIs(t, err, manager.ErrStopped)
		assert.ErrorIs(t, b.Do(context.Background(), func(context.Context) error { return nil }), manager.ErrStopped)
		_, err = manager.Call(context.Background(), b, func(context.Context) (int, error) { return 0, nil })
		assert.ErrorIs(t, err, manager.ErrStopped)
		assert.ErrorIs(t, b.ForceOpen(), manager.ErrStopped)
		assert.ErrorIs(t, b.Reset(), manager.ErrStopped)
		assert.True(t, b.Snapshot().Halted)
	}
	_, err := m.Register("late", manager.Config{})
	assert.ErrorIs(t, err, manager.ErrStopped)
	within(t, "Sync after the stop", m.Sync)
	ch, unsubscribe := m.Subscribe(1)
	_, open := <-ch
	assert.False(t, open, "a subscription to a stopped manager is closed")
	unsubscribe()

	assert.Equal(t, 1, counts.count(msgStopped), "the log says once why the manager stopped")
	assert.Equal(t, 2, counts.count(msgRestarted), "two restarts before the third panic")
	fig := l.finish()
	reportFigures(t, "restart-limit", 0, fig, 2)
}

// pathsCount is pathChecker.count while events are still coming.
func (l *load) pathsCount(name string, from, to breaker.State, cause breaker.Cause) int {
	l.pathsMu.Lock()
	defer l.pathsMu.Unlock()
	return l.paths.count(name, from, to, cause)
}

// waitFor polls cond, failing the test if it is still false after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A Classifier that panics inside Do: the panic reaches the caller, as a
// panic of fn would, and the call is released as a failure, so the probe
// slot it held is not left taken until the probe's time runs out.
func TestFaultClassifierPanicInDo(t *testing.T) {
	m, mock := startMock(t)
	errOdd := errors.New("unclassifiable")
	b := register(t, m, "picky", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: 2 * time.Second},
		Classify: func(err error) classify.Outcome {
			if errors.Is(err, errOdd) {
				panic("classifier exploded")
			}
			return classify.Default(err)
		},
	})
	fail(t, b, 1)
	advance(m, mock, time.Second)
	requireState(t, b, breaker.HalfOpen, "after the open period")
	assert.PanicsWithValue(t, "classifier exploded", func() {
		_ = b.Do(context.Background(), func(context.Context) error { return errOdd })
	})
	m.Sync()
	requireState(t, b, breaker.Open, "the probe released as a failure re-opens the breaker")
	st := b.Stats()
	assert.Equal(t, uint64(2), st.Failures, "the trip and the probe")
	assert.Equal(t, st.Calls, st.Successes+st.Failures+st.Ignored+st.Declined)
	advance(m, mock, time.Second)
	probe(t, b).Release(nil)
	requireState(t, b, breaker.Closed, "after a good probe")
}

// lateHook holds up the Record call of the first failure recorded while
// hold is set, until release is closed: as a caller preempted between the
// breaker's generation check and its counter would be.
type lateHook struct {
	hold    atomic.Bool
	entered chan struct{}
	release chan struct{}
}

// lateStrategy is Consecutive{Failures: 2} whose counters go through a
// lateHook.
type lateStrategy struct{ hook *lateHook }

func (s lateStrategy) NewCounter() (breaker.Counter, error) {
	inner, err := breaker.Consecutive{Failures: 2}.NewCounter()
	return &lateCounter{Counter: inner, hook: s.hook}, err
}

type lateCounter struct {
	breaker.Counter
	hook *lateHook
}

func (c *lateCounter) Record(o classify.Outcome, now time.Time) bool {
	if o == classify.Failure && c.hook.hold.CompareAndSwap(true, false) {
		close(c.hook.entered)
		<-c.hook.release
	}
	return c.Counter.Record(o, now)
}

// A late result from an old state must not count in the new one: a
// failure of a call admitted before the breaker tripped, whose caller was
// preempted between the breaker's generation check and its counter, lands
// after the breaker has recovered. The breaker, which trips on the second
// failure in a row, must still need two failures of its new generation.
func TestFaultLateReleaseAfterRecovery(t *testing.T) {
	m, mock := startMock(t)
	c := &lateHook{entered: make(chan struct{}), release: make(chan struct{})}
	b := register(t, m, "late", manager.Config{
		Strategy: lateStrategy{c},
		Recover:  recover.BasicTimeout{Open: time.Second},
	})
	old, err := b.Acquire(context.Background())
	require.NoError(t, err)
	c.hold.Store(true)
	released := make(chan struct{})
	go func() { defer close(released); old.Release(errBoom) }()
	<-c.entered // the old call passed the generation check

	fail(t, b, 2)
	requireState(t, b, breaker.Open, "tripped by two failures")
	advance(m, mock, time.Second)
	probe(t, b).Release(nil)
	requireState(t, b, breaker.Closed, "recovered")
	close(c.release)
	<-released

	fail(t, b, 1)
	m.Sync()
	requireState(t, b, breaker.Closed, "after one failure of the new generation (and the old call's late failure)")
	fail(t, b, 1)
	requireState(t, b, breaker.Open, "the second failure of the new generation trips it")
}

// --- shared breakers (Config.Store) ---

// heldStore is a store.Store with hooks: Resolve and AcquireProbe can be
// held up until let go (as a slow network would), and every call fails
// while cut.
type heldStore struct {
	store.Store
	cut atomic.Bool

	holdResolve  atomic.Bool
	resolving    chan struct{} // closed when a held Resolve begins
	letResolve   chan struct{}
	resolved     chan struct{} // closed when the held Resolve has returned
	holdProbe    atomic.Bool
	probing      chan struct{}
	letProbe     chan struct{}
	statusCalls  atomic.Int32
	statusReturn chan struct{} // receives after each Status call
	holdStatus   atomic.Bool   // the next Status call reads the store, then waits for letStatus
	statusRead   chan struct{}
	letStatus    chan struct{}
}

var errCutStore = errors.New("store cut off by the test")

func newHeldStore(s store.Store) *heldStore {
	return &heldStore{
		Store:     s,
		resolving: make(chan struct{}), letResolve: make(chan struct{}), resolved: make(chan struct{}),
		probing: make(chan struct{}), letProbe: make(chan struct{}),
		statusReturn: make(chan struct{}, 64),
		statusRead:   make(chan struct{}), letStatus: make(chan struct{}),
	}
}

func (s *heldStore) RecordFailure(ctx context.Context, name string, p store.Policy, n []int64) (store.Verdict, error) {
	if s.cut.Load() {
		return store.Verdict{}, errCutStore
	}
	return s.Store.RecordFailure(ctx, name, p, n)
}

func (s *heldStore) AcquireProbe(ctx context.Context, name, token string, epoch uint64, lease time.Duration) (bool, store.Status, error) {
	if s.holdProbe.CompareAndSwap(true, false) {
		close(s.probing)
		<-s.letProbe
	}
	if s.cut.Load() {
		return false, store.Status{}, errCutStore
	}
	return s.Store.AcquireProbe(ctx, name, token, epoch, lease)
}

func (s *heldStore) Resolve(ctx context.Context, name, token string, epoch uint64, o classify.Outcome, d time.Duration, why store.Reason) (store.Status, bool, error) {
	if s.holdResolve.CompareAndSwap(true, false) {
		close(s.resolving)
		<-s.letResolve
		defer close(s.resolved)
	}
	return s.Store.Resolve(ctx, name, token, epoch, o, d, why)
}

func (s *heldStore) Status(ctx context.Context, names []string) ([]store.Status, error) {
	defer func() {
		s.statusCalls.Add(1)
		select {
		case s.statusReturn <- struct{}{}:
		default:
		}
	}()
	if s.cut.Load() {
		return nil, errCutStore
	}
	st, err := s.Store.Status(ctx, names)
	if s.holdStatus.CompareAndSwap(true, false) {
		close(s.statusRead)
		<-s.letStatus
	}
	return st, err
}

// received waits, for a bounded time, until ch is closed or receives.
func received(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("still waiting after 5s for %s", what)
	}
}

// sharedPair is two managers (two replicas of a service) on one mock clock
// sharing the breaker "svc" through one in-memory store, each through its
// own heldStore. Store calls never time out on their own, and the resync
// runs every 5s of the mock clock.
func sharedPair(t *testing.T, cfg manager.Config) (*clock.Mock, *store.Memory, [2]*manager.Manager, [2]*manager.Breaker, [2]*heldStore) {
	t.Helper()
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	var ms [2]*manager.Manager
	var bs [2]*manager.Breaker
	var hs [2]*heldStore
	for i := range ms {
		ms[i] = manager.Start(manager.Options{Clock: mock, Logger: quietLogger, StoreTimeout: time.Hour, Resync: 5 * time.Second})
		t.Cleanup(ms[i].Stop)
		hs[i] = newHeldStore(mem)
		c := cfg
		c.Store = hs[i]
		bs[i] = register(t, ms[i], "svc", c)
	}
	return mock, mem, ms, bs, hs
}

// sharedStatus reads the store's status of "svc".
func sharedStatus(t *testing.T, mem *store.Memory) store.Status {
	t.Helper()
	st, err := mem.Status(context.Background(), []string{"svc"})
	require.NoError(t, err)
	return st[0]
}

// sharedHalfOpen trips the pair's breaker through replica 0 and lets its
// open period run out: both replicas end half-open.
func sharedHalfOpen(t *testing.T, mock *clock.Mock, ms [2]*manager.Manager, bs [2]*manager.Breaker, failures int) {
	t.Helper()
	fail(t, bs[0], failures)
	waitFor(t, 5*time.Second, "replica 1 to follow the trip", func() bool { return bs[1].State() == breaker.Open })
	mock.Add(time.Second)
	waitFor(t, 5*time.Second, "both replicas half-open after the open period", func() bool {
		ms[0].Sync()
		ms[1].Sync()
		return bs[0].State() == breaker.HalfOpen && bs[1].State() == breaker.HalfOpen
	})
}

var sharedCfg = manager.Config{
	Strategy: breaker.Consecutive{Failures: 2},
	Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: time.Minute},
}

// releaseProbe releases p with a success on another goroutine (the
// verdict may be sent to the store on the caller's goroutine) and returns
// a channel closed once Release has returned.
func releaseProbe(p manager.Permit) <-chan struct{} {
	done := make(chan struct{})
	go func() { defer close(done); p.Release(nil) }()
	return done
}

// A probe's verdict may reach the store after the replica that probed has
// closed its breaker, its callers going on meanwhile. The run of failures
// that tripped the breaker must not count in the new closed period: a
// breaker that trips on the second failure in a row must not trip on the
// first failure after it recovered, whether or not the store has heard of
// the recovery yet.
func TestFaultSharedLateVerdictOldFailuresCount(t *testing.T) {
	mock, _, ms, bs, hs := sharedPair(t, sharedCfg)
	sharedHalfOpen(t, mock, ms, bs, 2)
	hs[0].holdResolve.Store(true)
	released := releaseProbe(probe(t, bs[0]))
	received(t, hs[0].resolving, "the probe's verdict to be sent")

	if bs[0].State() == breaker.Closed { // closed before the store knows
		release(t, bs[0], errBoom)
		assert.Equal(t, breaker.Closed, bs[0].State(), "one failure after the recovery, while the verdict was on its way: the store still counted the failures from before the trip")
	}
	close(hs[0].letResolve)
	received(t, hs[0].resolved, "the verdict to be applied")
	received(t, released, "the probe's Release")
	waitFor(t, 5*time.Second, "replica 0 closed", func() bool { return bs[0].State() == breaker.Closed })
	if bs[0].Stats().Failures == 2 { // the failure above was not made
		release(t, bs[0], errBoom)
		assert.Equal(t, breaker.Closed, bs[0].State(), "one failure after the recovery")
	}
	release(t, bs[0], errBoom)
	assert.Equal(t, breaker.Open, bs[0].State(), "the second failure after the recovery")
}

// The verdict of a successful probe, applied late, must not erase an
// opening made after it: the replica that probed closes, trips again (two
// new failures), opens the breaker in the store; then its verdict lands.
// The fleet must stay open. (Nothing to check if the replica stays
// probing until the store has the verdict.)
func TestFaultSharedLateVerdictErasesNewOpening(t *testing.T) {
	mock, mem, ms, bs, hs := sharedPair(t, sharedCfg)
	sharedHalfOpen(t, mock, ms, bs, 2)
	hs[0].holdResolve.Store(true)
	released := releaseProbe(probe(t, bs[0]))
	received(t, hs[0].resolving, "the probe's verdict to be sent")

	reopened := false
	if bs[0].State() == breaker.Closed {
		for i := 0; i < 2 && bs[0].State() == breaker.Closed; i++ {
			release(t, bs[0], errBoom)
		}
		requireState(t, bs[0], breaker.Open, "after two new failures")
		waitFor(t, 5*time.Second, "the new opening to reach the store", func() bool { return sharedStatus(t, mem).Open > 0 })
		waitFor(t, 5*time.Second, "replica 1 to follow the new opening", func() bool { return bs[1].State() == breaker.Open })
		reopened = true
	}
	close(hs[0].letResolve)
	received(t, hs[0].resolved, "the verdict to be applied")
	received(t, released, "the probe's Release")
	if !reopened {
		return
	}
	assert.Positive(t, sharedStatus(t, mem).Open, "the store after the late verdict: the opening made after the probe is gone")
	for i, b := range bs {
		ms[i].Sync()
		assert.Equal(t, breaker.Open, b.State(), "replica %d after the late verdict", i)
	}
}

// A resync reads the store while this replica's probe holds the lease, and
// its answer reaches the manager only after the probe's success has closed
// the breaker here and in the store. That stale answer must not move the
// breaker back to probing (which declines every call).
func TestFaultSharedStaleResyncAfterVerdict(t *testing.T) {
	mock, mem, ms, bs, hs := sharedPair(t, sharedCfg)
	sharedHalfOpen(t, mock, ms, bs, 2)
	p := probe(t, bs[0])
	hs[0].holdStatus.Store(true)
	mock.Add(5 * time.Second) // the resync
	received(t, hs[0].statusRead, "the resync to read the store")

	received(t, releaseProbe(p), "the probe's Release")
	waitFor(t, 5*time.Second, "the verdict in the store and replica 0 closed", func() bool {
		st := sharedStatus(t, mem)
		return !st.Opened() && st.Open == 0 && st.Probe == 0 && bs[0].State() == breaker.Closed
	})
	close(hs[0].letStatus)
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) && bs[0].State() == breaker.Closed {
		ms[0].Sync()
		time.Sleep(time.Millisecond)
	}
	assert.Equal(t, breaker.Closed, bs[0].State(), "replica 0, closed by its probe, after a resync answer read while the probe held the lease")
}

// Events of a shared breaker losing or regaining its store say the state
// the breaker is in, with its generation: they come in the order of the
// breaker's transitions. Here the store is lost, as a resync finds, while a
// caller of breaker x, which has just taken x's probe, waits for the
// store's probe lease. (y's failed call alone would not take x down: one
// breaker's store error is that breaker's problem.)
func TestFaultSharedStoreEventsInOrder(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	hs := newHeldStore(mem)
	m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, StoreTimeout: time.Hour, Resync: time.Hour})
	t.Cleanup(m.Stop)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: time.Second}, Store: hs}
	x := register(t, m, "x", cfg)
	y := register(t, m, "y", cfg)
	events, unsubscribe := m.Subscribe(1024)
	defer unsubscribe()

	fail(t, x, 1)
	waitFor(t, 5*time.Second, "x's opening to reach the store", func() bool {
		st, err := mem.Status(context.Background(), []string{"x"})
		return err == nil && st[0].Open > 0
	})
	advance(m, mock, time.Second)
	waitFor(t, 5*time.Second, "x half-open", func() bool { m.Sync(); return x.State() == breaker.HalfOpen })
	hs.holdProbe.Store(true)
	acquired := make(chan struct{})
	go func() {
		defer close(acquired)
		if p, err := x.Acquire(context.Background()); err == nil {
			p.Release(nil)
		}
	}()
	received(t, hs.probing, "x's probe to ask for the lease")
	hs.cut.Store(true)
	p, err := y.Acquire(context.Background())
	require.NoError(t, err)
	p.Release(errBoom)  // y's store call fails: y falls back
	mock.Add(time.Hour) // the resync fails: the whole store is lost
	var got []manager.Event
	waitFor(t, 5*time.Second, "x's store_lost event", func() bool {
		got = append(got, drain(events)...)
		for _, e := range got {
			if e.Name == "x" && e.Kind == manager.EventStoreLost {
				return true
			}
		}
		return false
	})
	close(hs.letProbe)
	received(t, acquired, "x's probe call")
	m.Sync()
	got = append(got, drain(events)...)

	paths := newPathChecker()
	for _, e := range got {
		if e.Name == "x" {
			assert.NoError(t, paths.feed(e))
		}
	}
}

// flakyWatch is a store.Store whose Watch fails at once while failing is
// set, and whose current subscription the test can drop.
type flakyWatch struct {
	store.Store
	failing atomic.Bool
	calls   atomic.Int32
	live    atomic.Int32 // subscriptions in place
	mu      sync.Mutex
	drop    context.CancelFunc
}

func (w *flakyWatch) Watch(ctx context.Context, ready func(), fn func(store.Change)) error {
	w.calls.Add(1)
	if w.failing.Load() {
		return errCutStore
	}
	sub, cancel := context.WithCancel(ctx)
	defer cancel()
	w.mu.Lock()
	w.drop = cancel
	w.mu.Unlock()
	err := w.Store.Watch(sub, func() { w.live.Add(1); ready() }, fn)
	w.live.Add(-1)
	if ctx.Err() == nil {
		return errors.New("connection lost")
	}
	return err
}

func (w *flakyWatch) dropSubscription() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drop()
}

// stepUntil advances the mock clock in steps until cond holds, and
// reports whether it did within limit of mock time.
func stepUntil(mock *clock.Mock, step, limit time.Duration, cond func() bool) bool {
	for moved := time.Duration(0); moved <= limit; moved += step {
		if cond() {
			return true
		}
		mock.Add(step)
	}
	return cond()
}

// The watch of a store that failed several times in a row waits longer
// and longer before it subscribes again; once a subscription has worked,
// the next failure must start again from the shortest pause, or every
// later outage leaves the manager deaf to the fleet's changes for the
// longest pause (5s), whatever its resync period.
func TestFaultSharedWatchPauseStartsAgain(t *testing.T) {
	mock := clock.NewMock()
	w := &flakyWatch{Store: store.NewMemory(mock)}
	m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, StoreTimeout: time.Hour, Resync: time.Hour})
	t.Cleanup(m.Stop)
	register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 2}, Store: w})
	waitFor(t, 5*time.Second, "the first subscription", func() bool { return w.live.Load() == 1 })

	// Seven failures in a row: the pause grows to its longest.
	w.failing.Store(true)
	w.dropSubscription()
	require.True(t, stepUntil(mock, 10*time.Millisecond, 20*time.Second, func() bool { return w.calls.Load() >= 8 }),
		"seven failed subscriptions within 20s")
	w.failing.Store(false)
	require.True(t, stepUntil(mock, 10*time.Millisecond, 20*time.Second, func() bool { return w.live.Load() == 1 }),
		"subscribed again once the store answers")

	// One more failure after a subscription that worked.
	calls := w.calls.Load()
	w.dropSubscription()
	waitFor(t, 5*time.Second, "the watch to fail", func() bool { return w.live.Load() == 0 })
	assert.True(t, stepUntil(mock, 10*time.Millisecond, 500*time.Millisecond, func() bool { return w.calls.Load() > calls }),
		"the watch subscribes again within 500ms after a failure that follows a working subscription")
}

package manager_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
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
	// The real clock: Sync does not wait for a timer that is not due yet.
	for _, b := range bs {
		eventually(t, b.Name()+" half-open after its trip", func() bool { return b.State() == breaker.HalfOpen })
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
	// The load's callers trip the breakers on the real clock: nothing to
	// Sync.
	eventually(t, "the load to trip every breaker", func() bool {
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

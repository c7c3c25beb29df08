package manager_test

import (
	"context"
	"fmt"
	"log/slog"
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
)

const (
	msgRestartedOne = "fusebox: breaker restarted after a panic in its callback; it is closed, the others are as they were"
	msgWatchdog     = "fusebox: a callback has run for longer than Options.Watchdog and holds up every breaker's timers; " +
		"calling the manager (Sync, Register, Stop, ...) from a callback is the usual cause"
	msgAbandoned = "fusebox: Stop gave up waiting for a callback that has run for longer than Options.Watchdog; " +
		"the manager is stopped, and its goroutine ends when the callback returns"
)

// waitLog waits, for a bounded time, until the log holds n records with
// message msg: the watchdog runs beside the manager, on real time, so Sync
// does not wait for it.
func waitLog(t *testing.T, logs *logBuffer, msg string, n int) []map[string]any {
	t.Helper()
	var recs []map[string]any
	eventually(t, fmt.Sprintf("%d log records %q", n, msg), func() bool {
		recs = logs.find(t, msg)
		return len(recs) >= n
	})
	return recs
}

// With Options.RestartOne, a panic in one breaker's Recover restarts that breaker
// only: another one stays open with its timer, which fires when it is due.
func TestSupervisionRestartOne(t *testing.T) {
	m, mock, logs := superviseFixture(t, manager.Options{RestartOne: true})
	one := breaker.Consecutive{Failures: 1}
	bad := &panicky{}
	healthy := register(t, m, "healthy", manager.Config{Strategy: one, Recover: recover.BasicTimeout{Open: time.Hour}})
	b := register(t, m, "bad", manager.Config{Strategy: one, Recover: bad})
	fail(t, healthy, 1)
	m.Sync()
	until := healthy.Stats().Until

	bad.armed.Store(true)
	panicOnce(t, m, b)
	requireState(t, b, breaker.Closed, "the breaker whose Recover panicked, restarted")
	assert.Equal(t, int32(2), bad.inits.Load(), "Init at Register and at the restart")
	requireState(t, healthy, breaker.Open, "the other breaker, not restarted")
	assert.Equal(t, until, healthy.Stats().Until, "its open period is kept")
	recs := logs.find(t, msgRestartedOne)
	require.Len(t, recs, 1)
	assert.Equal(t, "bad", recs[0]["breaker"])
	assert.Empty(t, logs.find(t, msgRestarted), "not every breaker restarted")

	advance(m, mock, time.Hour)
	requireState(t, healthy, breaker.HalfOpen, "its timer fired when due")
}

// blocker is a Recover whose Timeout, while armed, tells started and then
// waits for release.
type blocker struct {
	armed   atomic.Bool
	started chan string
	release chan struct{}
	inside  func() // called inside the blocked Timeout, if set
}

func newBlocker() *blocker {
	return &blocker{started: make(chan string, 16), release: make(chan struct{})}
}

func (r *blocker) Init() (any, error) { return nil, nil }

func (r *blocker) Timeout(c recover.Context, state any) (time.Duration, any) {
	if r.armed.Load() {
		r.started <- c.Name
		if r.inside != nil {
			r.inside()
		}
		<-r.release
	}
	return time.Second, state
}

// With RestartOne, a breaker tripped in the same round of the loop as the
// one whose Recover panicked still gets its timer.
func TestSupervisionRestartOneSameRound(t *testing.T) {
	m, mock, _ := superviseFixture(t, manager.Options{RestartOne: true})
	one := breaker.Consecutive{Failures: 1}
	hold := newBlocker()
	holder := register(t, m, "holder", manager.Config{Strategy: one, Recover: hold})
	bad := &panicky{}
	b := register(t, m, "bad", manager.Config{Strategy: one, Recover: bad})
	other := register(t, m, "other", manager.Config{Strategy: one, Recover: recover.BasicTimeout{Open: 5 * time.Second}})
	bad.armed.Store(true)
	hold.armed.Store(true)

	fail(t, holder, 1) // the manager blocks in holder's Timeout
	<-hold.started
	fail(t, b, 1) // both wait in the queue and are handled together
	fail(t, other, 1)
	hold.armed.Store(false)
	close(hold.release)
	m.Sync()

	requireState(t, b, breaker.Closed, "restarted")
	requireState(t, other, breaker.Open, "not restarted")
	assert.False(t, other.Stats().Until.IsZero(), "other's open period was asked for and armed")
	advance(m, mock, 5*time.Second)
	requireState(t, other, breaker.HalfOpen, "other's timer fired")
	requireState(t, holder, breaker.HalfOpen, "holder's timer fired")
}

// haltManager makes the manager halt: five panics within ten seconds.
func haltManager(t *testing.T, m *manager.Manager, b *manager.Breaker, rec *panicky) {
	t.Helper()
	rec.armed.Store(true)
	for range 5 {
		panicOnce(t, m, b)
	}
	select {
	case <-m.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the manager did not halt after five panics")
	}
}

// A halted manager shows: every breaker's State and Stats.State say
// halted (not closed), every breaker gets an EventHalted, and the log says
// what calls get.
func TestSupervisionHaltedIsVisible(t *testing.T) {
	m, _, logs := superviseFixture(t, manager.Options{})
	rec := &panicky{}
	b := register(t, m, "bad", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: rec})
	healthy := register(t, m, "healthy", manager.Config{})
	open := register(t, m, "open", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: time.Hour}})
	fail(t, open, 1)
	m.Sync()
	events, _ := m.Subscribe(64)
	haltManager(t, m, b, rec)

	var halted []string
	for e := range events {
		if e.Kind == manager.EventHalted {
			halted = append(halted, e.Name)
			assert.Equal(t, breaker.Transition{}, e.Transition, "a halt is no transition")
			snap, _ := m.Breaker(e.Name)
			assert.Equal(t, snap.Snapshot().Gen, e.Gen, "%s: the event carries the last generation", e.Name)
		}
	}
	assert.ElementsMatch(t, []string{"bad", "healthy", "open"}, halted, "one EventHalted per breaker")
	for _, br := range []*manager.Breaker{b, healthy, open} {
		assert.Equal(t, breaker.Halted, br.State(), "%s: State", br.Name())
		assert.Equal(t, breaker.Halted, br.Stats().State, "%s: Stats.State", br.Name())
		assert.Equal(t, "halted", br.State().String())
		checkStopped(t, m, br)
	}
	stopped := logs.find(t, msgStopped)
	require.Len(t, stopped, 1)
	assert.Equal(t, "declined with ErrStopped", stopped[0]["calls"])
}

// Stop is not a halt: the breakers keep showing the state they were in.
func TestSupervisionStopIsNotHalted(t *testing.T) {
	m, _, _ := superviseFixture(t, manager.Options{})
	b := register(t, m, "b", manager.Config{})
	m.Stop()
	assert.Equal(t, breaker.Closed, b.State())
	assert.Equal(t, breaker.Closed, b.Stats().State)
}

// With FailOpen, a halted manager lets calls through unprotected and
// counts them; nothing trips any more; Stop then declines them.
func TestSupervisionFailOpen(t *testing.T) {
	m, _, logs := superviseFixture(t, manager.Options{FailOpen: true})
	rec := &panicky{}
	b := register(t, m, "bad", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: rec})
	other := register(t, m, "other", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	before := other.Stats()
	haltManager(t, m, b, rec)

	ctx := context.Background()
	for range 3 {
		p, err := other.Acquire(ctx)
		require.NoError(t, err, "Acquire once halted with FailOpen")
		assert.False(t, p.Probe())
		p.Release(errBoom)
	}
	ran := 0
	assert.ErrorIs(t, other.Do(ctx, func(context.Context) error { ran++; return errBoom }), errBoom)
	v, err := manager.Call(ctx, other, func(context.Context) (int, error) { ran++; return 7, nil })
	assert.NoError(t, err)
	assert.Equal(t, 7, v)
	assert.Equal(t, 2, ran, "Do and Call ran their functions")
	p, err := other.Acquire(ctx)
	require.NoError(t, err)
	p.ReleaseOutcome(classify.Ignore)

	st := other.Stats()
	assert.Equal(t, breaker.Halted, st.State, "nothing tripped: the breaker says halted")
	assert.Equal(t, uint64(6), st.Unprotected)
	assert.Equal(t, before.Failures+4, st.Failures)
	assert.Equal(t, before.Successes+1, st.Successes)
	assert.Equal(t, before.Ignored+1, st.Ignored)
	assert.Zero(t, st.Stale, "an unprotected call is not stale")
	assert.Equal(t, st.Successes+st.Failures+st.Ignored+st.Declined, st.Calls)
	assert.ErrorIs(t, other.ForceOpen(), manager.ErrStopped, "no manual control once halted")
	stopped := logs.find(t, msgStopped)
	require.Len(t, stopped, 1)
	assert.Equal(t, "let through unprotected (Options.FailOpen)", stopped[0]["calls"])

	m.Stop()
	checkStopped(t, m, other)
}

// A Recover.Timeout that blocks is logged by the watchdog once it has run
// for Options.Watchdog, with the breaker's name and the callback, and again
// when that time has doubled.
func TestWatchdogLogsAStuckCallback(t *testing.T) {
	const bound = 20 * time.Millisecond
	m, mock, logs := superviseFixture(t, manager.Options{Watchdog: bound})
	rec := newBlocker()
	rec.armed.Store(true)
	b := register(t, m, "slow", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: rec})
	start := time.Now()
	fail(t, b, 1)
	assert.Equal(t, "slow", <-rec.started)

	recs := waitLog(t, logs, msgWatchdog, 1)
	assert.GreaterOrEqual(t, time.Since(start), bound, "not logged before the bound")
	assert.Equal(t, "slow", recs[0]["breaker"])
	assert.Equal(t, "Recover.Timeout", recs[0]["callback"])
	recs = waitLog(t, logs, msgWatchdog, 2)
	assert.GreaterOrEqual(t, recs[1]["running_for"], float64(2*bound), "logged again once the time has doubled")

	rec.armed.Store(false)
	close(rec.release)
	m.Sync()
	requireState(t, b, breaker.Open, "the manager goes on once the callback returns")
	advance(m, mock, time.Second)
	requireState(t, b, breaker.HalfOpen, "with the period Recover gave")
}

// A callback that calls the manager deadlocks it; the watchdog says so, and
// Stop ends all the same once the callback has run for Options.Watchdog:
// every call then gets ErrStopped. When the callback returns at last, the
// manager's goroutine ends without doing anything more.
func TestWatchdogCallbackCallsTheManager(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	m, _, logs := superviseFixture(t, manager.Options{Watchdog: 20 * time.Millisecond})
	rec := newBlocker()
	rec.inside = m.Sync // deadlocks: the loop is the one running this
	rec.armed.Store(true)
	b := register(t, m, "reentrant", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: rec})
	events, _ := m.Subscribe(8)
	fail(t, b, 1)
	<-rec.started
	waitLog(t, logs, msgWatchdog, 1)

	stopped := make(chan struct{})
	go func() { m.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return while a callback is stuck")
	}
	recs := logs.find(t, msgAbandoned)
	require.Len(t, recs, 1)
	assert.Equal(t, "reentrant", recs[0]["breaker"])
	checkStopped(t, m, b)
	for range events { // closed by Stop
	}

	close(rec.release) // Sync inside the callback returned with Stop; the callback returns
	goleak.VerifyNone(t, ignore)
}

// Stop called while a callback runs waits for it, up to Options.Watchdog
// from its start; a callback that returns in time is waited for.
func TestStopWaitsForACallbackWithinTheWatchdog(t *testing.T) {
	m, _, logs := superviseFixture(t, manager.Options{Watchdog: time.Hour})
	rec := newBlocker()
	rec.armed.Store(true)
	b := register(t, m, "b", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: rec})
	fail(t, b, 1)
	<-rec.started
	stopped := make(chan struct{})
	go func() { m.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a callback within the bound was running")
	case <-time.After(20 * time.Millisecond):
	}
	rec.armed.Store(false)
	close(rec.release)
	<-stopped
	assert.Empty(t, logs.find(t, msgAbandoned))
	assert.Equal(t, breaker.Open, b.State(), "the callback's breaker stopped where it was")
}

// On the real clock, Stop returns within about Options.Watchdog of the
// start of a callback that never returns.
func TestStopEndsWhileACallbackBlocksRealClock(t *testing.T) {
	logs := &logBuffer{}
	m := manager.Start(manager.Options{Logger: logs.logger(), Watchdog: 20 * time.Millisecond})
	rec := newBlocker()
	rec.armed.Store(true)
	b, err := m.Register("stuck", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: rec})
	require.NoError(t, err)
	fail(t, b, 1)
	<-rec.started
	stopped := make(chan struct{})
	go func() { m.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return")
	}
	assert.Len(t, logs.find(t, msgAbandoned), 1)
	close(rec.release)
}

// panicHandler is a slog.Handler that panics on every record.
type panicHandler struct{}

func (panicHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (panicHandler) Handle(context.Context, slog.Record) error { panic("handler exploded") }
func (h panicHandler) WithAttrs([]slog.Attr) slog.Handler      { return h }
func (h panicHandler) WithGroup(string) slog.Handler           { return h }

// A Logger whose Handler panics does not take the manager down: panics in
// callbacks are still recovered and restarted from.
func TestPanickingLogger(t *testing.T) {
	m := manager.Start(manager.Options{Clock: clock.NewMock(), Logger: slog.New(panicHandler{}), MaxRestarts: 100})
	defer m.Stop()
	rec := &panicky{}
	rec.armed.Store(true)
	b := register(t, m, "bad", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: rec})
	for i := range 3 {
		panicOnce(t, m, b)
		requireState(t, b, breaker.Closed, fmt.Sprintf("restarted after panic %d", i+1))
	}
	select {
	case <-m.Done():
		t.Fatal("the manager stopped")
	default:
	}
}

// initBlocker is a Recover whose Init tells started and blocks until
// release.
type initBlocker struct {
	started chan struct{}
	release chan struct{}
}

func (r initBlocker) Init() (any, error) {
	close(r.started)
	<-r.release
	return nil, nil
}

func (initBlocker) Timeout(recover.Context, any) (time.Duration, any) { return time.Second, nil }

// A Register whose Recover.Init blocks holds up its caller only: Init
// runs on the caller's goroutine, so the manager registers others, handles
// their timers and stops meanwhile, and the stuck Register, once Init
// returns, finds the manager stopped.
func TestARegisterStuckInInitHoldsUpOnlyItsCaller(t *testing.T) {
	m, mock, _ := superviseFixture(t, manager.Options{Watchdog: 20 * time.Millisecond})
	rec := initBlocker{started: make(chan struct{}), release: make(chan struct{})}
	registered := make(chan error, 1)
	go func() {
		_, err := m.Register("stuck", manager.Config{Recover: rec})
		registered <- err
	}()
	<-rec.started
	b, err := m.Register("other", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: time.Second}})
	require.NoError(t, err)
	fail(t, b, 1)
	advance(m, mock, time.Second)
	requireState(t, b, breaker.HalfOpen, "the other breaker's timer, while Init blocks")
	within(t, "Stop while Init blocks", m.Stop)
	close(rec.release)
	select {
	case err := <-registered:
		assert.ErrorIs(t, err, manager.ErrStopped)
	case <-time.After(10 * time.Second):
		t.Fatal("Register did not return once Init did")
	}
}

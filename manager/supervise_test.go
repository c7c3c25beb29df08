package manager_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// Log messages the supervision tests look for.
const (
	msgPanic     = "fusebox: recovered a panic in a callback"
	msgRestarted = "fusebox: manager restarted after a panic; every breaker is closed"
	msgStopped   = "fusebox: manager stopped: too many panics in callbacks"
	msgInitFail  = "fusebox: Recover.Init failed on restart; keeping the breaker's previous recovery state"
)

// panicky is a Recover that counts its Init calls and whose Timeout panics
// while armed.
type panicky struct {
	inits    atomic.Int32
	armed    atomic.Bool
	failInit atomic.Bool // Init returns an error
	open     time.Duration
}

func (p *panicky) Init() (any, error) {
	p.inits.Add(1)
	if p.failInit.Load() {
		return nil, errors.New("init refused")
	}
	return "state", nil
}

func (p *panicky) Timeout(_ recover.Context, state any) (time.Duration, any) {
	if p.armed.Load() {
		panic("recover exploded")
	}
	d := p.open
	if d == 0 {
		d = time.Second
	}
	return d, state
}

// superviseFixture is a manager on a mock clock whose log is kept.
func superviseFixture(t *testing.T, opts manager.Options) (*manager.Manager, *clock.Mock, *logBuffer) {
	t.Helper()
	return superviseFixtureWithLogs(t, &logBuffer{}, opts)
}

func superviseFixtureWithLogs(t *testing.T, logs *logBuffer, opts manager.Options) (*manager.Manager, *clock.Mock, *logBuffer) {
	t.Helper()
	mock := clock.NewMock()
	opts.Clock = mock
	opts.Logger = logs.logger()
	m := manager.Start(opts)
	t.Cleanup(m.Stop)
	return m, mock, logs
}

// A panic in Recover.Timeout is logged; every breaker restarts closed (a
// forced one stays forced), keeps its registration and gets Init again.
func TestSupervisionRestart(t *testing.T) {
	m, mock, logs := superviseFixture(t, manager.Options{})
	one := breaker.Consecutive{Failures: 1}
	badRec, goodRec, forcedRec := &panicky{}, &panicky{}, &panicky{}
	good := register(t, m, "good", manager.Config{Strategy: one, Recover: goodRec})
	bad := register(t, m, "bad", manager.Config{Strategy: one, Recover: badRec})
	forced := register(t, m, "forced", manager.Config{Strategy: one, Recover: forcedRec})
	events, unsubscribe := m.Subscribe(16)
	defer unsubscribe()

	fail(t, good, 1) // good is open with a 1s timer
	require.NoError(t, forced.ForceOpen())
	m.Sync()
	advance(m, mock, 100*time.Millisecond)
	panicAt := mock.Now()

	badRec.armed.Store(true)
	fail(t, bad, 1)
	m.Sync()
	badRec.armed.Store(false)

	recs := logs.find(t, msgPanic)
	require.Len(t, recs, 1, "one panic logged")
	r := recs[0]
	assert.Equal(t, "ERROR", r["level"])
	assert.Equal(t, "bad", r["breaker"])
	assert.Equal(t, "Recover.Timeout", r["callback"])
	assert.Equal(t, "recover exploded", r["panic"])
	assert.Contains(t, r["stack"], "panicky", "the stack shows where it panicked")
	require.Len(t, logs.find(t, msgRestarted), 1)
	assert.Empty(t, logs.find(t, msgStopped))

	requireState(t, good, breaker.Closed, "after the restart")
	requireState(t, bad, breaker.Closed, "after the restart")
	requireState(t, forced, breaker.Open, "a forced breaker stays forced across a restart")
	assert.True(t, forced.Stats().Forced)
	for name, rec := range map[string]*panicky{"good": goodRec, "bad": badRec, "forced": forcedRec} {
		assert.Equal(t, int32(2), rec.inits.Load(), "Init calls of %s: at Register and at the restart", name)
	}
	assert.Len(t, m.Breakers(), 3, "registrations are kept")
	got, ok := m.Breaker("bad")
	require.True(t, ok)
	assert.Same(t, bad, got)

	C, O := breaker.Closed, breaker.Open
	want := []ev{
		{"good", C, O, classify.Failure, breaker.CauseTrip, 0},
		{"forced", C, O, 0, breaker.CauseForceOpen, 0},
		{"bad", C, O, classify.Failure, breaker.CauseTrip, 100 * time.Millisecond},
		{"good", O, C, 0, breaker.CauseRestart, 100 * time.Millisecond},
		{"bad", O, C, 0, breaker.CauseRestart, 100 * time.Millisecond},
	}
	assert.Equal(t, want, evsOf(drain(events), panicAt.Add(-100*time.Millisecond)))

	// The old timer of good is gone, and the breakers work as before.
	advance(m, mock, time.Second)
	requireState(t, good, breaker.Closed, "the timer from before the restart is dropped")
	fail(t, bad, 1)
	m.Sync()
	assert.Equal(t, mock.Now().Add(time.Second), declined(t, bad).Until)
	advance(m, mock, time.Second)
	requireState(t, bad, breaker.HalfOpen, "after a normal open period")
	probe(t, bad).Release(nil)
	requireState(t, bad, breaker.Closed, "after the probe")
	require.NoError(t, forced.Reset())
	release(t, forced, nil)
	_, err := m.Register("late", manager.Config{})
	require.NoError(t, err, "Register after a restart")
}

// panicOnce trips b, whose Recover panics, at the mock clock's current time.
func panicOnce(t *testing.T, m *manager.Manager, b *manager.Breaker) {
	t.Helper()
	fail(t, b, 1)
	m.Sync()
}

// checkStopped checks that every call gets ErrStopped.
func checkStopped(t *testing.T, m *manager.Manager, b *manager.Breaker) {
	t.Helper()
	ctx := context.Background()
	p, err := b.Acquire(ctx)
	assert.ErrorIs(t, err, manager.ErrStopped, "Acquire")
	assert.False(t, errors.Is(err, breaker.ErrOpen), "Acquire on a stopped manager is not ErrOpen")
	p.Release(errBoom) // a zero permit: does nothing
	ran := false
	err = b.Do(ctx, func(context.Context) error { ran = true; return nil })
	assert.ErrorIs(t, err, manager.ErrStopped, "Do")
	_, err = manager.Call(ctx, b, func(context.Context) (int, error) { ran = true; return 1, nil })
	assert.ErrorIs(t, err, manager.ErrStopped, "Call")
	assert.False(t, ran, "no fn runs once stopped")
	nb, err := m.Register("after-stop", manager.Config{})
	assert.ErrorIs(t, err, manager.ErrStopped, "Register")
	assert.Nil(t, nb)
	assert.Contains(t, fmt.Sprint(err), `"after-stop"`)
	assert.ErrorIs(t, b.ForceOpen(), manager.ErrStopped, "ForceOpen")
	assert.ErrorIs(t, b.Reset(), manager.ErrStopped, "Reset")
	m.Sync() // returns at once
}

// Five panics within ten seconds stop the manager for good; every call
// then gets ErrStopped, and the manager's goroutine is gone.
func TestSupervisionStopsAfterFivePanics(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	m, mock, logs := superviseFixture(t, manager.Options{})
	rec := &panicky{}
	rec.armed.Store(true)
	b := register(t, m, "bad", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: rec})
	other := register(t, m, "other", manager.Config{})
	events, _ := m.Subscribe(64)

	for i := range 4 {
		panicOnce(t, m, b) // at 0s, 2s, 4s, 6s
		requireState(t, b, breaker.Closed, fmt.Sprintf("after panic %d", i+1))
		select {
		case <-m.Done():
			t.Fatalf("the manager stopped after %d panics", i+1)
		default:
		}
		advance(m, mock, 2*time.Second)
	}
	assert.Equal(t, int32(5), rec.inits.Load(), "Init at Register and at each of 4 restarts")
	panicOnce(t, m, b) // at 8s: the fifth within 10s

	select {
	case <-m.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the manager did not stop after five panics within ten seconds")
	}
	require.Len(t, logs.find(t, msgPanic), 5)
	require.Len(t, logs.find(t, msgRestarted), 4)
	stopped := logs.find(t, msgStopped)
	require.Len(t, stopped, 1, "the log says why the manager stopped")
	assert.Equal(t, float64(5), stopped[0]["panics"])
	assert.Equal(t, "bad", stopped[0]["last_breaker"])

	checkStopped(t, m, b)
	checkStopped(t, m, other)
	for range events { // closed when the manager stopped
	}
	goleak.VerifyNone(t, ignore)
	m.Stop() // still fine
}

// Four panics, then a fifth just inside or just outside ten seconds of the
// first.
func TestSupervisionWindowEdge(t *testing.T) {
	for _, c := range []struct {
		gap  time.Duration
		stop bool
	}{
		{10*time.Second - time.Millisecond, true},
		{10*time.Second + time.Millisecond, false},
	} {
		t.Run(c.gap.String(), func(t *testing.T) {
			m, mock, logs := superviseFixture(t, manager.Options{})
			rec := &panicky{}
			rec.armed.Store(true)
			b := register(t, m, "bad", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: rec})
			for range 4 {
				panicOnce(t, m, b)
			}
			advance(m, mock, c.gap)
			panicOnce(t, m, b)
			select {
			case <-m.Done():
				require.True(t, c.stop, "stopped with the fifth panic %v after the first", c.gap)
				checkStopped(t, m, b)
			default:
				require.False(t, c.stop, "still running with the fifth panic %v after the first", c.gap)
				assert.Empty(t, logs.find(t, msgStopped))
				requireState(t, b, breaker.Closed, "after the restart")
			}
		})
	}
}

// Panics spread out over more than ten seconds never stop the manager.
func TestSupervisionSpreadPanicsDoNotStop(t *testing.T) {
	for _, c := range []struct {
		name   string
		panics int
		every  time.Duration
	}{
		{"four over 12s", 4, 4 * time.Second},
		{"four at once", 4, 0},
		{"twelve, one every 3s", 12, 3 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, mock, logs := superviseFixture(t, manager.Options{})
			rec := &panicky{}
			rec.armed.Store(true)
			b := register(t, m, "bad", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: rec})
			for i := range c.panics {
				if i > 0 {
					advance(m, mock, c.every)
				}
				panicOnce(t, m, b)
			}
			select {
			case <-m.Done():
				t.Fatalf("%s stopped the manager", c.name)
			default:
			}
			assert.Len(t, logs.find(t, msgPanic), c.panics)
			assert.Len(t, logs.find(t, msgRestarted), c.panics)
			assert.Equal(t, int32(c.panics+1), rec.inits.Load())
			rec.armed.Store(false)
			fail(t, b, 1)
			m.Sync()
			requireState(t, b, breaker.Open, "a working trip after the restarts")
		})
	}
}

// Options.MaxRestarts and RestartWindow set the limit.
func TestSupervisionCustomLimit(t *testing.T) {
	m, mock, _ := superviseFixture(t, manager.Options{MaxRestarts: 2, RestartWindow: time.Minute})
	rec := &panicky{}
	rec.armed.Store(true)
	b := register(t, m, "bad", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: rec})
	panicOnce(t, m, b)
	advance(m, mock, 59*time.Second)
	panicOnce(t, m, b)
	select {
	case <-m.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the second panic within a minute did not stop the manager")
	}
	checkStopped(t, m, b)
}

// Negative limits are logged and replaced by the defaults.
func TestSupervisionNegativeOptions(t *testing.T) {
	m, _, logs := superviseFixture(t, manager.Options{MaxRestarts: -1, RestartWindow: -time.Second})
	recs := logs.records(t)
	require.Len(t, recs, 2)
	assert.Contains(t, recs[0]["msg"], "MaxRestarts")
	assert.Contains(t, recs[1]["msg"], "RestartWindow")
	rec := &panicky{}
	rec.armed.Store(true)
	b := register(t, m, "bad", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: rec})
	for range 4 {
		panicOnce(t, m, b)
	}
	select {
	case <-m.Done():
		t.Fatal("stopped before the default of five panics")
	default:
	}
	panicOnce(t, m, b)
	<-m.Done()
}

// initPanics is a Recover whose Init panics.
type initPanics struct{}

func (initPanics) Init() (any, error) { panic("init exploded") }
func (initPanics) Timeout(recover.Context, any) (time.Duration, any) {
	return time.Second, nil
}

// A panicking Init at Register fails that Register; it is not a restart.
func TestSupervisionInitPanicAtRegister(t *testing.T) {
	m, _, logs := superviseFixture(t, manager.Options{})
	rec := &panicky{}
	good := register(t, m, "good", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: rec})
	fail(t, good, 1)

	for i := range 6 { // more than the restart limit: none of them counts
		b, err := m.Register("bad", manager.Config{Recover: initPanics{}})
		require.Error(t, err, "Register %d", i)
		assert.Nil(t, b)
		msg := err.Error()
		assert.Contains(t, msg, `"bad"`)
		assert.Contains(t, msg, "Config.Recover")
		assert.Contains(t, msg, "init exploded")
		assert.True(t, strings.HasPrefix(msg, "fusebox: "), msg)
		assert.False(t, errors.Is(err, manager.ErrStopped))
	}
	m.Sync()
	assert.Empty(t, logs.find(t, msgPanic), "not logged as a callback panic")
	assert.Empty(t, logs.find(t, msgRestarted), "no restart")
	assert.Equal(t, int32(1), rec.inits.Load(), "no other Init call")
	requireState(t, good, breaker.Open, "other breakers are untouched")
	_, ok := m.Breaker("bad")
	assert.False(t, ok)
	register(t, m, "bad", manager.Config{})
}

// An Init that fails on a restart is logged, and the breaker keeps its
// previous recovery state.
func TestSupervisionInitFailsOnRestart(t *testing.T) {
	m, mock, logs := superviseFixture(t, manager.Options{})
	bad := &panicky{}
	picky := &panicky{open: 3 * time.Second}
	b := register(t, m, "bad", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: bad})
	p := register(t, m, "picky", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: picky})
	picky.failInit.Store(true)
	bad.armed.Store(true)
	panicOnce(t, m, b)
	bad.armed.Store(false)

	recs := logs.find(t, msgInitFail)
	require.Len(t, recs, 1)
	assert.Equal(t, "picky", recs[0]["breaker"])
	assert.Contains(t, recs[0]["error"], "init refused")

	fail(t, p, 1)
	advance(m, mock, 3*time.Second)
	requireState(t, p, breaker.HalfOpen, "picky still works after its Init failed on restart")
}

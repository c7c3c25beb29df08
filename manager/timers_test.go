package manager_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// With a 1s open period the breaker is open 999ms after the trip and
// half-open at 1000ms.
func TestOpenPeriodEdge(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "edge", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: 500 * time.Millisecond},
	})
	advance(m, mock, 123*time.Millisecond) // the trip need not be at the clock's start
	tripAt := mock.Now()
	fail(t, b, 1)
	m.Sync()
	assert.Equal(t, tripAt.Add(time.Second), declined(t, b).Until)

	advance(m, mock, 999*time.Millisecond)
	requireState(t, b, breaker.Open, "999ms after the trip")
	oe := declined(t, b)
	assert.Equal(t, breaker.Open, oe.State)
	assert.Equal(t, tripAt.Add(time.Second), oe.Until)

	advance(m, mock, time.Millisecond)
	requireState(t, b, breaker.HalfOpen, "1000ms after the trip")
	st := b.Stats()
	assert.Equal(t, tripAt.Add(time.Second), st.Since, "half_open entered when the timer was due")
	assert.True(t, st.Until.IsZero(), "half_open has no timer")
}

// A probe that runs longer than its probe timeout is given up on exactly at
// the timeout.
func TestProbeTimeoutEdge(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "edge", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: 300 * time.Millisecond},
	})
	fail(t, b, 1)
	advance(m, mock, time.Second)
	advance(m, mock, 50*time.Millisecond) // the probe starts a while after half_open
	probeAt := mock.Now()
	p := probe(t, b)
	m.Sync()
	oe := declined(t, b)
	assert.Equal(t, breaker.Probing, oe.State)
	assert.Equal(t, probeAt.Add(300*time.Millisecond), oe.Until)

	advance(m, mock, 299*time.Millisecond)
	requireState(t, b, breaker.Probing, "299ms into a 300ms probe timeout")
	advance(m, mock, time.Millisecond)
	requireState(t, b, breaker.HalfOpen, "at the 300ms probe timeout")
	p.Release(nil)
	requireState(t, b, breaker.HalfOpen, "after the timed-out probe's late success")
}

// A single Add across many deadlines fires them in order, and Sync alone
// (without Add) fires nothing early.
func TestSyncFiresOnlyDueTimers(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "b", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Minute},
	})
	fail(t, b, 1)
	for range 10 {
		m.Sync()
	}
	requireState(t, b, breaker.Open, "after Syncs without time passing")
	advance(m, mock, time.Hour)
	requireState(t, b, breaker.HalfOpen, "an hour after the trip")
}

// doubling is the Recover from the recover.Func documentation: every open
// period and probe timeout is twice the previous one, starting at 1s.
func doubling() recover.Recover {
	return recover.Func(
		func() (time.Duration, error) { return time.Second, nil },
		func(_ recover.Context, d time.Duration) (time.Duration, time.Duration) { return d, 2 * d },
	)
}

// The doubling Recover yields 1s, 2s, 4s, 8s, ... in the order the
// transitions that ask for a duration happen: trip, probe start, probe
// failure, probe start, ...
func TestDoublingRecover(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "doubling", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  doubling(),
	})
	events, unsubscribe := m.Subscribe(64)
	defer unsubscribe()
	t0 := mock.Now()

	// expectEdge checks that the breaker stays in state until exactly d
	// after from, then moves to half_open.
	expectEdge := func(step string, state breaker.State, from time.Time, d time.Duration) {
		t.Helper()
		m.Sync()
		oe := declined(t, b)
		require.Equal(t, state, oe.State, step)
		require.Equal(t, from.Add(d), oe.Until, "%s: Until should be %v after its start", step, d)
		st := b.Stats()
		require.Equal(t, from, st.Since, step)
		require.Equal(t, from.Add(d), st.Until, step)
		advance(m, mock, from.Add(d).Sub(mock.Now())-time.Millisecond)
		requireState(t, b, state, fmt.Sprintf("%s: 1ms before %v", step, d))
		advance(m, mock, time.Millisecond)
		requireState(t, b, breaker.HalfOpen, fmt.Sprintf("%s: at %v", step, d))
	}

	// Trip: open 1s.
	fail(t, b, 1)
	expectEdge("trip", breaker.Open, t0, time.Second)

	// Probe starts: probe timeout 2s; the probe fails after 500ms.
	advance(m, mock, 250*time.Millisecond)
	p := probe(t, b)
	start := mock.Now()
	m.Sync()
	oe := declined(t, b)
	assert.Equal(t, breaker.Probing, oe.State)
	assert.Equal(t, start.Add(2*time.Second), oe.Until, "first probe timeout")
	advance(m, mock, 500*time.Millisecond)
	failedAt := mock.Now()
	p.Release(errBoom)
	requireState(t, b, breaker.Open, "after the probe failed")

	// Probe failed: open 4s.
	expectEdge("first failed probe", breaker.Open, failedAt, 4*time.Second)

	// Probe starts: probe timeout 8s, and this probe runs out of time.
	start = mock.Now()
	p = probe(t, b)
	expectEdge("second probe", breaker.Probing, start, 8*time.Second)
	p.Release(errBoom)
	requireState(t, b, breaker.HalfOpen, "a timed-out probe's failure changes nothing")

	// Probe starts: 16s; it fails at once: open 32s.
	p = probe(t, b)
	m.Sync()
	assert.Equal(t, mock.Now().Add(16*time.Second), declined(t, b).Until, "third probe timeout")
	failedAt = mock.Now()
	p.Release(errBoom)
	expectEdge("second failed probe", breaker.Open, failedAt, 32*time.Second)

	// Probe starts: 64s; it succeeds and closes the breaker without asking
	// Recover, so the next trip gets 128s.
	p = probe(t, b)
	m.Sync()
	assert.Equal(t, mock.Now().Add(64*time.Second), declined(t, b).Until, "fourth probe timeout")
	p.Release(nil)
	requireState(t, b, breaker.Closed, "after the probe succeeded")
	advance(m, mock, time.Second)
	fail(t, b, 1)
	expectEdge("second trip", breaker.Open, mock.Now(), 128*time.Second)

	// The events say the same, in order, on the mock clock.
	type step struct {
		from, to breaker.State
		o        classify.Outcome
		c        breaker.Cause
	}
	var got []step
	for _, e := range drain(events) {
		assert.Equal(t, "doubling", e.Name)
		got = append(got, step{e.Transition.From, e.Transition.To, e.Outcome, e.Cause})
	}
	C, O, H, P := breaker.Closed, breaker.Open, breaker.HalfOpen, breaker.Probing
	F, S := classify.Failure, classify.Success
	want := []step{
		{C, O, F, breaker.CauseTrip}, {O, H, 0, breaker.CauseTimer},
		{H, P, 0, breaker.CauseProbe}, {P, O, F, breaker.CauseProbe}, {O, H, 0, breaker.CauseTimer},
		{H, P, 0, breaker.CauseProbe}, {P, H, 0, breaker.CauseTimer},
		{H, P, 0, breaker.CauseProbe}, {P, O, F, breaker.CauseProbe}, {O, H, 0, breaker.CauseTimer},
		{H, P, 0, breaker.CauseProbe}, {P, C, S, breaker.CauseProbe},
		{C, O, F, breaker.CauseTrip}, {O, H, 0, breaker.CauseTimer},
	}
	assert.Equal(t, want, got)
}

// recorder is a Recover that records every Context it is asked about and
// answers from a fixed list of durations.
type recorder struct {
	asked []recover.Context
	ds    []time.Duration
}

func (r *recorder) Init() (any, error) { return 0, nil }

func (r *recorder) Timeout(c recover.Context, state any) (time.Duration, any) {
	r.asked = append(r.asked, c)
	i := state.(int)
	return r.ds[i%len(r.ds)], i + 1
}

// Recover is asked exactly at {closed, open}, {half_open, probing} and
// {probing, open}, with the outcome of the call that opened the breaker.
func TestRecoverIsAskedAtTheThreeTransitions(t *testing.T) {
	m, mock := startMock(t)
	r := &recorder{ds: []time.Duration{time.Second}}
	b := register(t, m, "r", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: r})
	fail(t, b, 1)
	advance(m, mock, time.Second)
	probe(t, b).Release(errBoom)
	advance(m, mock, time.Second)
	probe(t, b).ReleaseOutcome(classify.Ignore)
	probe(t, b).Release(nil)
	require.NoError(t, b.ForceOpen())
	require.NoError(t, b.Reset())
	m.Sync()

	C, O, H, P := breaker.Closed, breaker.Open, breaker.HalfOpen, breaker.Probing
	want := []recover.Context{
		{Name: "r", Transition: breaker.Transition{From: C, To: O}, Outcome: classify.Failure, Err: errBoom},
		{Name: "r", Transition: breaker.Transition{From: H, To: P}},
		{Name: "r", Transition: breaker.Transition{From: P, To: O}, Outcome: classify.Failure, Err: errBoom},
		{Name: "r", Transition: breaker.Transition{From: H, To: P}},
		{Name: "r", Transition: breaker.Transition{From: H, To: P}},
	}
	// r.asked is written by the manager's goroutine; Sync orders it before
	// this read. Each Context carries the instant of its transition.
	got := append([]recover.Context(nil), r.asked...)
	for i := range got {
		assert.False(t, got[i].At.IsZero(), "Context %d has no At", i)
		got[i].At = time.Time{}
	}
	assert.Equal(t, want, got)
	assert.True(t, r.asked[0].At.Equal(mock.Now().Add(-2*time.Second)), "the trip's At is the trip's instant: %v", r.asked[0].At)
}

// A Recover that returns a zero or negative duration ends the state at
// once, on the next Sync.
func TestZeroAndNegativeTimeout(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		t.Run(d.String(), func(t *testing.T) {
			m, _ := startMock(t)
			r := &recorder{ds: []time.Duration{d}}
			b := register(t, m, "z", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: r})
			fail(t, b, 1)
			m.Sync()
			requireState(t, b, breaker.HalfOpen, "after a zero open period")
			p := probe(t, b)
			m.Sync()
			requireState(t, b, breaker.HalfOpen, "after a zero probe timeout")
			p.Release(nil)
			requireState(t, b, breaker.HalfOpen, "the timed-out probe changes nothing")
		})
	}
}

// An enormous duration does not overflow into the past.
func TestHugeTimeout(t *testing.T) {
	m, mock := startMock(t)
	r := &recorder{ds: []time.Duration{time.Duration(1<<63 - 1)}}
	b := register(t, m, "huge", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: r})
	advance(m, mock, time.Hour)
	fail(t, b, 1)
	advance(m, mock, 100*365*24*time.Hour)
	requireState(t, b, breaker.Open, "a century into a maximal open period")
	assert.True(t, declined(t, b).Until.After(mock.Now()))
}

// Many breakers share one timer heap; each ends its open period at its own
// deadline.
func TestManyBreakersOwnDeadlines(t *testing.T) {
	m, mock := startMock(t)
	const n = 200
	bs := make([]*manager.Breaker, n)
	for i := range bs {
		bs[i] = register(t, m, fmt.Sprintf("b%03d", i), manager.Config{
			Strategy: breaker.Consecutive{Failures: 1},
			// Registered in an order unrelated to their deadlines.
			Recover: recover.BasicTimeout{Open: time.Duration((i*7919)%n+1) * time.Millisecond},
		})
		fail(t, bs[i], 1)
	}
	for ms := 1; ms <= n; ms++ {
		advance(m, mock, time.Millisecond)
		for i, b := range bs {
			d := (i*7919)%n + 1
			want := breaker.Open
			if d <= ms {
				want = breaker.HalfOpen
			}
			if b.State() != want {
				t.Fatalf("at %dms breaker %s with open period %dms is %v, want %v", ms, b.Name(), d, b.State(), want)
			}
		}
	}
}

// A breaker reset during its open period ignores the old timer; the
// deadline of its next trip counts from the new trip.
func TestStaleTimerAfterReset(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "b", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second},
	})
	fail(t, b, 1)
	advance(m, mock, 600*time.Millisecond)
	require.NoError(t, b.Reset())
	fail(t, b, 1)
	secondTrip := mock.Now()
	advance(m, mock, 400*time.Millisecond) // the first trip's deadline
	requireState(t, b, breaker.Open, "at the first trip's stale deadline")
	assert.Equal(t, secondTrip.Add(time.Second), declined(t, b).Until)
	advance(m, mock, 600*time.Millisecond)
	requireState(t, b, breaker.HalfOpen, "at the second trip's deadline")
}

func TestDoAsProbe(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "b", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second},
	})
	fail(t, b, 1)
	advance(m, mock, time.Second)
	ran := false
	err := b.Do(context.Background(), func(context.Context) error {
		ran = true
		requireState(t, b, breaker.Probing, "inside the probe")
		assert.ErrorIs(t, b.Do(context.Background(), func(context.Context) error { return nil }), breaker.ErrOpen)
		return nil
	})
	require.NoError(t, err)
	assert.True(t, ran)
	requireState(t, b, breaker.Closed, "after Do's probe succeeded")
}

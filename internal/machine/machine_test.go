package machine_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/machine"
)

// t0 is the instant every sequence starts from; the others are offsets of it.
var t0 = time.Date(2026, 1, 2, 15, 4, 0, 0, time.UTC)

const (
	closed   = breaker.Closed
	open     = breaker.Open
	halfOpen = breaker.HalfOpen
	probing  = breaker.Probing
)

func tr(from, to breaker.State) breaker.Transition { return breaker.Transition{From: from, To: to} }

// fixture drives one Machine the way package manager does, and remembers
// the tickets it was given under the names the steps use.
type fixture struct {
	m       *machine.Machine
	tickets map[string]machine.Ticket
}

// result is what one input did to the machine. Steps compare it whole.
type result struct {
	Moved    breaker.Transition // the transition made; zero for none
	Cause    breaker.Cause      // the step's cause; zero for none
	Timer    bool               // the step's NeedsTimer
	State    breaker.State      // the state afterwards
	Declined bool               // an Acquire got an *OpenError
	Halted   bool               // an Acquire got a zero ticket and no error
	Stale    bool               // a release was Stale
}

// String reads like "closed->open (trip, timer), now open".
func (r result) String() string {
	var b strings.Builder
	if r.Moved == (breaker.Transition{}) {
		b.WriteString("no transition")
	} else {
		fmt.Fprintf(&b, "%v (%v", r.Moved, r.Cause)
		if r.Timer {
			b.WriteString(", timer")
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, ", now %v", r.State)
	for _, f := range []struct {
		set  bool
		name string
	}{{r.Declined, "declined"}, {r.Halted, "halted"}, {r.Stale, "stale"}} {
		if f.set {
			b.WriteString(", " + f.name)
		}
	}
	return b.String()
}

// input is one call on the machine at one instant.
type input struct {
	desc  string
	apply func(f *fixture) (machine.Step, bool, result)
}

func at(d time.Duration) time.Time { return t0.Add(d) }

func when(t time.Time) string { return "t0+" + t.Sub(t0).String() }

// acquire calls Acquire at now and keeps the ticket as name.
func acquire(name string, now time.Time) input {
	return input{
		desc: fmt.Sprintf("Acquire(%s) as %q", when(now), name),
		apply: func(f *fixture) (machine.Step, bool, result) {
			tk, step, err := f.m.Acquire(now)
			var r result
			switch {
			case err != nil:
				r.Declined = true
			case tk.Gen == 0:
				r.Halted = true
			default:
				f.tickets[name] = tk
			}
			return step, step.Gen != 0, r
		},
	}
}

// release reports the outcome of the call holding ticket name, as the
// manager does: a probe ends with EndProbe; a closed-state call is recorded,
// and trips the breaker when the strategy says so.
func release(name string, o classify.Outcome, now time.Time) input {
	return input{
		desc: fmt.Sprintf("release %q with %v at %s", name, o, when(now)),
		apply: func(f *fixture) (machine.Step, bool, result) {
			tk, ok := f.tickets[name]
			if !ok {
				panic("no ticket named " + name)
			}
			if tk.Probe {
				step, rel := f.m.EndProbe(tk, o, nil, now)
				return step, rel == machine.Counted, result{Stale: rel == machine.Stale}
			}
			trip, rel := f.m.Record(tk, o, now)
			if rel == machine.Stale {
				return machine.Step{}, false, result{Stale: true}
			}
			if trip {
				step, ok := f.m.Trip(tk.Gen, o, nil, now)
				return step, ok, result{}
			}
			return machine.Step{}, false, result{}
		},
	}
}

// expire ends the timer of the current generation plus offset (zero: the
// current one) at now.
func expire(offset int, now time.Time) input {
	return input{
		desc: fmt.Sprintf("Expire(gen%+d, %s)", offset, when(now)),
		apply: func(f *fixture) (machine.Step, bool, result) {
			gen := uint64(int64(f.m.Snapshot().Gen) + int64(offset))
			step, ok := f.m.Expire(gen, now)
			return step, ok, result{}
		},
	}
}

func forceOpen(now time.Time) input {
	return input{
		desc: fmt.Sprintf("ForceOpen(%s)", when(now)),
		apply: func(f *fixture) (machine.Step, bool, result) {
			step, ok := f.m.ForceOpen(now)
			return step, ok, result{}
		},
	}
}

func reset(now time.Time, cause breaker.Cause) input {
	return input{
		desc: fmt.Sprintf("Reset(%s, %v)", when(now), cause),
		apply: func(f *fixture) (machine.Step, bool, result) {
			step, ok := f.m.Reset(now, cause)
			return step, ok, result{}
		},
	}
}

// trip calls Trip for the current generation directly, as a caller whose
// Record returned true does.
func trip(now time.Time) input {
	return input{
		desc: fmt.Sprintf("Trip(gen, failure, %s)", when(now)),
		apply: func(f *fixture) (machine.Step, bool, result) {
			step, ok := f.m.Trip(f.m.Snapshot().Gen, classify.Failure, nil, now)
			return step, ok, result{}
		},
	}
}

func halt() input {
	return input{
		desc: "Halt()",
		apply: func(f *fixture) (machine.Step, bool, result) {
			f.m.Halt()
			return machine.Step{}, false, result{}
		},
	}
}

// step is one input and what it must do.
type step struct {
	in   input
	want result
}

// moved is the result of a step that made transition t with cause c.
func moved(from, to breaker.State, c breaker.Cause, timer bool) result {
	return result{Moved: tr(from, to), Cause: c, Timer: timer, State: to}
}

// stays is the result of a step that made no transition.
func stays(s breaker.State) result { return result{State: s} }

// run applies the steps in order to a machine named "svc" counting with
// strategy s, created at t0, and checks every step's result, the step's
// bookkeeping (generation, instant) and the snapshot afterwards.
func run(t *testing.T, s breaker.Strategy, steps []step) *fixture {
	t.Helper()
	m, err := machine.NewMachine("svc", s, t0)
	require.NoError(t, err, "NewMachine(%+v)", s)
	f := &fixture{m: m, tickets: map[string]machine.Ticket{}}
	for i, st := range steps {
		before := f.m.Snapshot()
		step, ok, got := st.in.apply(f)
		after := f.m.Snapshot()
		got.State = after.State
		if ok {
			got.Moved, got.Cause, got.Timer = step.Transition, step.Cause, step.NeedsTimer()
		}
		if got != st.want {
			t.Fatalf("step %d: %s in %v (gen %d):\n got %v\nwant %v", i, st.in.desc, before.State, before.Gen, got, st.want)
		}
		if ok {
			assert.Equal(t, before.Gen+1, step.Gen, "step %d: %s: Step.Gen", i, st.in.desc)
			assert.Equal(t, step.Gen, after.Gen, "step %d: %s: Snapshot.Gen", i, st.in.desc)
			assert.Equal(t, step.At, after.Since, "step %d: %s: Snapshot.Since is the step's instant", i, st.in.desc)
			assert.True(t, after.Until.IsZero(), "step %d: %s: a new state has no Until yet", i, st.in.desc)
		} else if !after.Halted {
			// A Reset of a closed breaker publishes a fresh counter in the
			// same generation; nothing else may change.
			assert.Equal(t, before.Gen, after.Gen, "step %d: %s made no transition but changed the generation", i, st.in.desc)
			assert.Equal(t, before.State, after.State, "step %d: %s made no transition but changed the state", i, st.in.desc)
		}
	}
	return f
}

// tripped is the start of many sequences: a Consecutive{Failures: 2}
// breaker trips at t0+2s and is open.
func tripped() []step {
	return []step{
		{acquire("a", at(0)), stays(closed)},
		{acquire("b", at(time.Second)), stays(closed)},
		{release("a", classify.Failure, at(time.Second)), stays(closed)},
		{release("b", classify.Failure, at(2*time.Second)), moved(closed, open, breaker.CauseTrip, true)},
	}
}

// probingAt is tripped, then the open period ends at t0+32s and "p" takes
// the probe at t0+33s.
func probingAt() []step {
	return append(tripped(),
		step{expire(0, at(32*time.Second)), moved(open, halfOpen, breaker.CauseTimer, false)},
		step{acquire("p", at(33*time.Second)), moved(halfOpen, probing, breaker.CauseProbe, true)},
	)
}

func TestMachineTransitions(t *testing.T) {
	declined := func(s breaker.State) result { return result{State: s, Declined: true} }
	stale := func(s breaker.State) result { return result{State: s, Stale: true} }
	two := breaker.Consecutive{Failures: 2}

	tests := []struct {
		name  string
		steps []step
	}{
		{"closed->open: trip on the second failure", tripped()},
		{"open declines every call", append(tripped(),
			step{acquire("c", at(3*time.Second)), declined(open)},
			step{acquire("d", at(31*time.Second)), declined(open)},
		)},
		{"open->half_open: Expire", append(tripped(),
			step{expire(0, at(32*time.Second)), moved(open, halfOpen, breaker.CauseTimer, false)},
		)},
		{"half_open->probing: the first Acquire is the probe, the next is declined", append(probingAt(),
			step{acquire("q", at(33*time.Second)), declined(probing)},
		)},
		{"probing->closed: the probe succeeds", append(probingAt(),
			step{release("p", classify.Success, at(34*time.Second)), moved(probing, closed, breaker.CauseProbe, false)},
			step{acquire("after", at(35*time.Second)), stays(closed)},
		)},
		{"probing->open: the probe fails", append(probingAt(),
			step{release("p", classify.Failure, at(34*time.Second)), moved(probing, open, breaker.CauseProbe, true)},
			step{acquire("after", at(35*time.Second)), declined(open)},
		)},
		{"probing->open: a probe released with an invalid outcome counts as a failure", append(probingAt(),
			step{release("p", 0, at(34*time.Second)), moved(probing, open, breaker.CauseProbe, true)},
		)},
		{"probing->half_open: the probe is ignored and the slot is free again", append(probingAt(),
			step{release("p", classify.Ignore, at(34*time.Second)), moved(probing, halfOpen, breaker.CauseProbe, false)},
			step{acquire("p2", at(35*time.Second)), moved(halfOpen, probing, breaker.CauseProbe, true)},
		)},
		{"probing->half_open: the probe timer runs out and the late release is stale", append(probingAt(),
			step{expire(0, at(63*time.Second)), moved(probing, halfOpen, breaker.CauseTimer, false)},
			step{release("p", classify.Success, at(64*time.Second)), stale(halfOpen)},
			step{acquire("p2", at(65*time.Second)), moved(halfOpen, probing, breaker.CauseProbe, true)},
			step{release("p", classify.Failure, at(66*time.Second)), stale(probing)},
			step{release("p2", classify.Success, at(67*time.Second)), moved(probing, closed, breaker.CauseProbe, false)},
		)},
		{"a probe released twice counts once", append(probingAt(),
			step{release("p", classify.Failure, at(34*time.Second)), moved(probing, open, breaker.CauseProbe, true)},
			step{release("p", classify.Success, at(35*time.Second)), stale(open)},
		)},
		{"stale closed-state tickets never count", append(
			[]step{{acquire("old", at(0)), stays(closed)}},
			append(probingAt(),
				step{release("p", classify.Success, at(34*time.Second)), moved(probing, closed, breaker.CauseProbe, false)},
				// "old" was admitted before the trip: its failure is stale
				// and must not be the first of two.
				step{release("old", classify.Failure, at(35*time.Second)), stale(closed)},
				step{acquire("c", at(36*time.Second)), stays(closed)},
				step{release("c", classify.Failure, at(36*time.Second)), stays(closed)},
				step{acquire("d", at(37*time.Second)), stays(closed)},
				step{release("d", classify.Failure, at(37*time.Second)), moved(closed, open, breaker.CauseTrip, true)},
			)...,
		)},
		{"a closed-state ticket is stale while open", append(
			[]step{{acquire("old", at(0)), stays(closed)}},
			append(tripped(),
				step{release("old", classify.Failure, at(3*time.Second)), stale(open)},
			)...,
		)},
		{"a closed-state ticket is not a probe ticket", append(
			[]step{{acquire("old", at(0)), stays(closed)}},
			append(probingAt(),
				step{release("old", classify.Success, at(34*time.Second)), stale(probing)},
			)...,
		)},
		{"Expire with a wrong generation does nothing", append(tripped(),
			step{expire(-1, at(32*time.Second)), stays(open)},
			step{expire(+1, at(32*time.Second)), stays(open)},
			step{expire(0, at(32*time.Second)), moved(open, halfOpen, breaker.CauseTimer, false)},
		)},
		{"Expire of an earlier open period does nothing", append(probingAt(),
			step{release("p", classify.Failure, at(34*time.Second)), moved(probing, open, breaker.CauseProbe, true)},
			// gen-3 is the open period that the trip started.
			step{expire(-3, at(62*time.Second)), stays(open)},
			step{expire(0, at(94*time.Second)), moved(open, halfOpen, breaker.CauseTimer, false)},
		)},
		{"Expire in closed does nothing", append(tripped()[:1],
			step{expire(0, at(time.Second)), stays(closed)},
		)},
		{"Expire in half_open does nothing", append(tripped(),
			step{expire(0, at(32*time.Second)), moved(open, halfOpen, breaker.CauseTimer, false)},
			step{expire(0, at(33*time.Second)), stays(halfOpen)},
		)},
		{"Trip of a breaker already open does nothing", append(tripped(),
			step{trip(at(3 * time.Second)), stays(open)},
		)},
		{"ForceOpen from closed: no timer, no Expire undoes it, Reset lifts it", []step{
			{acquire("a", at(0)), stays(closed)},
			{forceOpen(at(time.Second)), moved(closed, open, breaker.CauseForceOpen, false)},
			{forceOpen(at(2 * time.Second)), stays(open)},
			{expire(0, at(time.Hour)), stays(open)},
			{acquire("b", at(time.Hour)), declined(open)},
			{release("a", classify.Failure, at(time.Hour)), stale(open)},
			{reset(at(2*time.Hour), breaker.CauseRestart), stays(open)},
			{expire(0, at(3*time.Hour)), stays(open)},
			{reset(at(4*time.Hour), breaker.CauseReset), moved(open, closed, breaker.CauseReset, false)},
			{acquire("c", at(4*time.Hour)), stays(closed)},
		}},
		{"ForceOpen of an open breaker keeps it open for good", append(tripped(),
			step{forceOpen(at(3 * time.Second)), moved(open, open, breaker.CauseForceOpen, false)},
			step{expire(0, at(32*time.Second)), stays(open)},
			step{expire(-1, at(32*time.Second)), stays(open)},
		)},
		{"ForceOpen while probing makes the probe stale", append(probingAt(),
			step{forceOpen(at(34 * time.Second)), moved(probing, open, breaker.CauseForceOpen, false)},
			step{release("p", classify.Success, at(35*time.Second)), stale(open)},
		)},
		{"Reset by hand closes an open breaker", append(tripped(),
			step{reset(at(3*time.Second), breaker.CauseReset), moved(open, closed, breaker.CauseReset, false)},
			step{expire(-1, at(32*time.Second)), stays(closed)},
		)},
		{"Reset on restart closes a breaker that is not forced", append(probingAt(),
			step{reset(at(34*time.Second), breaker.CauseRestart), moved(probing, closed, breaker.CauseRestart, false)},
			step{release("p", classify.Failure, at(35*time.Second)), stale(closed)},
		)},
		{"Reset of a closed breaker makes no transition but clears the count", []step{
			{acquire("a", at(0)), stays(closed)},
			{release("a", classify.Failure, at(0)), stays(closed)},
			{reset(at(time.Second), breaker.CauseReset), stays(closed)},
			{acquire("b", at(2*time.Second)), stays(closed)},
			{release("b", classify.Failure, at(2*time.Second)), stays(closed)},
			{acquire("c", at(3*time.Second)), stays(closed)},
			{release("c", classify.Failure, at(3*time.Second)), moved(closed, open, breaker.CauseTrip, true)},
		}},
		{"a success between failures starts the count again", []step{
			{acquire("a", at(0)), stays(closed)},
			{release("a", classify.Failure, at(0)), stays(closed)},
			{acquire("b", at(time.Second)), stays(closed)},
			{release("b", classify.Success, at(time.Second)), stays(closed)},
			{acquire("c", at(2*time.Second)), stays(closed)},
			{release("c", classify.Failure, at(2*time.Second)), stays(closed)},
			{acquire("d", at(3*time.Second)), stays(closed)},
			{release("d", classify.Failure, at(3*time.Second)), moved(closed, open, breaker.CauseTrip, true)},
		}},
		{"Halt refuses every call and every transition", append(probingAt(),
			step{halt(), stays(probing)},
			step{acquire("x", at(34*time.Second)), result{State: probing, Halted: true}},
			step{release("p", classify.Success, at(35*time.Second)), stale(probing)},
			step{expire(0, at(63*time.Second)), stays(probing)},
			step{forceOpen(at(64 * time.Second)), stays(probing)},
			step{reset(at(65*time.Second), breaker.CauseReset), stays(probing)},
			step{trip(at(66 * time.Second)), stays(probing)},
			step{halt(), stays(probing)},
		)},
		{"Halt in closed: outstanding tickets are stale", []step{
			{acquire("a", at(0)), stays(closed)},
			{halt(), stays(closed)},
			{release("a", classify.Failure, at(time.Second)), stale(closed)},
			{acquire("b", at(time.Second)), result{State: closed, Halted: true}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { run(t, two, tt.steps) })
	}
}

func TestMachineStartsClosed(t *testing.T) {
	m, err := machine.NewMachine("payments", breaker.Consecutive{Failures: 1}, t0)
	require.NoError(t, err)
	s := m.Snapshot()
	assert.Equal(t, "payments", m.Name())
	assert.False(t, m.UsesClock())
	assert.Equal(t, closed, s.State)
	assert.Equal(t, uint64(1), s.Gen, "the first generation is 1, so a zero Ticket is never current")
	assert.Equal(t, t0, s.Since)
	assert.True(t, s.Admits())
	assert.False(t, s.Declines())
	assert.Nil(t, s.Err)
	assert.False(t, s.Forced)
	assert.False(t, s.Halted)

	var z machine.Machine // Init on a zero Machine, as drivers embedding it do
	require.NoError(t, z.Init("embedded", breaker.Consecutive{Failures: 1}, t0))
	_, err = machine.NewMachine("bad", breaker.Consecutive{}, t0)
	var ce *breaker.ConfigError
	require.ErrorAs(t, err, &ce, "an invalid strategy fails NewMachine")
	assert.Equal(t, "embedded", z.Name())
	assert.Equal(t, closed, z.Snapshot().State)
}

func TestMachineCurrent(t *testing.T) {
	f := run(t, breaker.Consecutive{Failures: 1}, []step{
		{acquire("a", at(0)), stays(closed)},
	})
	a := f.tickets["a"]
	assert.NotNil(t, f.m.Current(a), "a ticket of the current closed generation is current")
	assert.Nil(t, f.m.Current(machine.Ticket{Gen: a.Gen, Probe: true}), "a probe ticket is never a closed-state ticket")
	assert.Nil(t, f.m.Current(machine.Ticket{}), "the zero ticket is never current")
	_, ok := f.m.Trip(a.Gen, classify.Failure, nil, at(time.Second))
	require.True(t, ok)
	assert.Nil(t, f.m.Current(a), "after a trip the ticket is stale")
}

func TestMachineSnapshotFlags(t *testing.T) {
	f := run(t, breaker.Consecutive{Failures: 2}, tripped())
	s := f.m.Snapshot()
	assert.False(t, s.Admits())
	assert.True(t, s.Declines(), "open declines")
	require.NotNil(t, s.Err)
	_, _, err := f.m.Acquire(at(3 * time.Second))
	assert.Same(t, s.Err, err, "a declined call gets the error built with the snapshot")

	_, ok := f.m.Expire(s.Gen, at(32*time.Second))
	require.True(t, ok)
	s = f.m.Snapshot()
	assert.False(t, s.Admits())
	assert.False(t, s.Declines(), "half_open neither admits nor declines: the caller may become the probe")

	f.m.Halt()
	s = f.m.Snapshot()
	assert.True(t, s.Halted)
	assert.False(t, s.Admits())
	assert.False(t, s.Declines())
}

func TestMachineDeclinedCallsShareOneError(t *testing.T) {
	f := run(t, breaker.Consecutive{Failures: 2}, tripped())
	_, _, e1 := f.m.Acquire(at(3 * time.Second))
	_, _, e2 := f.m.Acquire(at(4 * time.Second))
	require.NotNil(t, e1)
	assert.Same(t, e1, e2, "every call declined in one open period gets the same *OpenError")
	assert.Equal(t, &breaker.OpenError{Name: "svc", State: open}, e1)
	assert.Zero(t, testing.AllocsPerRun(100, func() { f.m.Acquire(at(5 * time.Second)) }), "declining allocates nothing")
}

func TestMachineSetUntil(t *testing.T) {
	f := run(t, breaker.Consecutive{Failures: 2}, tripped())
	gen := f.m.Snapshot().Gen
	until := at(32 * time.Second)

	assert.False(t, f.m.SetUntil(gen-1, until), "SetUntil for an earlier generation")
	assert.False(t, f.m.SetUntil(gen+1, until), "SetUntil for a later generation")
	_, _, err := f.m.Acquire(at(3 * time.Second))
	require.NotNil(t, err)
	assert.True(t, err.Until.IsZero(), "no Until before SetUntil")

	before := f.m.Snapshot()
	require.True(t, f.m.SetUntil(gen, until), "SetUntil(%d, %s)", gen, when(until))
	after := f.m.Snapshot()
	assert.Equal(t, gen, after.Gen, "SetUntil makes no transition")
	assert.Equal(t, before.State, after.State)
	assert.Equal(t, before.Since, after.Since)
	assert.Equal(t, until, after.Until)

	_, _, err = f.m.Acquire(at(4 * time.Second))
	require.NotNil(t, err)
	assert.Equal(t, &breaker.OpenError{Name: "svc", State: open, Until: until}, err)
	assert.Equal(t, `fusebox: breaker "svc" is open until 2026-01-02T15:04:32Z`, err.Error())

	// The probe's time shows the same way while probing.
	_, ok := f.m.Expire(gen, until)
	require.True(t, ok)
	tk, step, _ := f.m.Acquire(at(33 * time.Second))
	require.True(t, tk.Probe)
	probeEnd := at(63*time.Second + 500*time.Millisecond)
	require.True(t, f.m.SetUntil(step.Gen, probeEnd))
	_, _, err = f.m.Acquire(at(34 * time.Second))
	require.NotNil(t, err)
	assert.Equal(t, `fusebox: breaker "svc" is probing (one trial call in flight) until 2026-01-02T15:05:03.5Z`, err.Error())

	// Closed and halted breakers have nothing to wait for.
	_, _ = f.m.EndProbe(tk, classify.Success, nil, at(35*time.Second))
	assert.False(t, f.m.SetUntil(f.m.Snapshot().Gen, at(time.Hour)), "SetUntil on a closed breaker")
	f.m.ForceOpen(at(36 * time.Second))
	f.m.Halt()
	assert.False(t, f.m.SetUntil(f.m.Snapshot().Gen, at(time.Hour)), "SetUntil on a halted breaker")
}

func TestMachineSetUntilKeepsForced(t *testing.T) {
	f := run(t, breaker.Consecutive{Failures: 1}, []step{
		{forceOpen(at(0)), moved(closed, open, breaker.CauseForceOpen, false)},
	})
	require.True(t, f.m.SetUntil(f.m.Snapshot().Gen, at(time.Minute)))
	assert.True(t, f.m.Snapshot().Forced, "SetUntil must not lift a forced open")
	_, ok := f.m.Expire(f.m.Snapshot().Gen, at(time.Minute))
	assert.False(t, ok, "Expire after SetUntil on a forced breaker")
}

func TestMachineForcedSnapshot(t *testing.T) {
	f := run(t, breaker.Consecutive{Failures: 1}, []step{
		{forceOpen(at(0)), moved(closed, open, breaker.CauseForceOpen, false)},
	})
	s := f.m.Snapshot()
	assert.True(t, s.Forced)
	assert.True(t, s.Until.IsZero())
	assert.Equal(t, `fusebox: breaker "svc" is open`, s.Err.Error())

	_, ok := f.m.Reset(at(time.Second), breaker.CauseReset)
	require.True(t, ok)
	assert.False(t, f.m.Snapshot().Forced, "Reset lifts the force")
}

func TestStepNeedsTimer(t *testing.T) {
	tests := []struct {
		from, to breaker.State
		cause    breaker.Cause
		want     bool
	}{
		{closed, open, breaker.CauseTrip, true},
		{probing, open, breaker.CauseProbe, true},
		{halfOpen, probing, breaker.CauseProbe, true},
		{closed, open, breaker.CauseForceOpen, false},
		{probing, open, breaker.CauseForceOpen, false},
		{open, open, breaker.CauseForceOpen, false},
		{open, halfOpen, breaker.CauseTimer, false},
		{probing, halfOpen, breaker.CauseTimer, false},
		{probing, halfOpen, breaker.CauseProbe, false},
		{probing, closed, breaker.CauseProbe, false},
		{open, closed, breaker.CauseReset, false},
		{probing, closed, breaker.CauseRestart, false},
	}
	for _, tt := range tests {
		s := machine.Step{Transition: tr(tt.from, tt.to), Cause: tt.cause}
		assert.Equal(t, tt.want, s.NeedsTimer(), "Step{%v, %v}.NeedsTimer()", s.Transition, tt.cause)
	}
}

func TestOpenError(t *testing.T) {
	until := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	tests := []struct {
		err  breaker.OpenError
		want string
	}{
		{breaker.OpenError{Name: "payments", State: open, Until: until}, `fusebox: breaker "payments" is open until 2026-01-02T15:04:05Z`},
		{breaker.OpenError{Name: "payments", State: open}, `fusebox: breaker "payments" is open`},
		{breaker.OpenError{Name: "payments", State: halfOpen}, `fusebox: breaker "payments" is half_open`},
		{breaker.OpenError{Name: "payments", State: probing, Until: until.Add(1500 * time.Millisecond)}, `fusebox: breaker "payments" is probing (one trial call in flight) until 2026-01-02T15:04:06.5Z`},
		{breaker.OpenError{Name: `a "quoted" name`, State: open}, `fusebox: breaker "a \"quoted\" name" is open`},
	}
	for _, tt := range tests {
		err := &tt.err
		assert.Equal(t, tt.want, err.Error(), "%+v", tt.err)
		assert.ErrorIs(t, err, breaker.ErrOpen, "%+v", tt.err)
		wrapped := fmt.Errorf("charge: %w", err)
		assert.ErrorIs(t, wrapped, breaker.ErrOpen, "wrapped %+v", tt.err)
		var oe *breaker.OpenError
		require.ErrorAs(t, wrapped, &oe)
		assert.Same(t, err, oe)
	}
	assert.False(t, (&breaker.OpenError{}).Is(errors.New("fusebox: breaker is open")), "Is matches ErrOpen itself, not its text")
	assert.Equal(t, "fusebox: breaker is open", breaker.ErrOpen.Error())
}

func TestStrings(t *testing.T) {
	states := map[breaker.State]string{closed: "closed", open: "open", halfOpen: "half_open", probing: "probing", 0: "state(0)", 9: "state(9)"}
	for s, want := range states {
		assert.Equal(t, want, s.String(), "State(%d).String()", uint8(s))
	}
	assert.Equal(t, "closed->open", tr(closed, open).String())
	assert.Equal(t, "half_open->probing", tr(halfOpen, probing).String())

	causes := map[breaker.Cause]string{
		breaker.CauseTrip: "trip", breaker.CauseProbe: "probe", breaker.CauseTimer: "timer",
		breaker.CauseForceOpen: "force_open", breaker.CauseReset: "reset", breaker.CauseRestart: "restart",
		0: "none", 42: "cause(42)",
	}
	for c, want := range causes {
		assert.Equal(t, want, c.String(), "Cause(%d).String()", uint8(c))
	}
}

func TestMachineOneProbeAmongManyCallers(t *testing.T) {
	const callers = 1000
	f := run(t, breaker.Consecutive{Failures: 2}, append(tripped(),
		step{expire(0, at(32*time.Second)), moved(open, halfOpen, breaker.CauseTimer, false)},
	))
	gen := f.m.Snapshot().Gen

	type got struct {
		tk   machine.Ticket
		step machine.Step
		err  *breaker.OpenError
	}
	results := make([]got, callers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			tk, step, err := f.m.Acquire(at(33 * time.Second))
			results[i] = got{tk, step, err}
		}()
	}
	close(start)
	wg.Wait()

	probes := 0
	for i, r := range results {
		if r.err != nil {
			assert.Equal(t, probing, r.err.State, "caller %d was declined in %v", i, r.err.State)
			assert.Zero(t, r.tk, "caller %d: a declined call gets no ticket", i)
			continue
		}
		probes++
		assert.Equal(t, machine.Ticket{Gen: gen + 1, Probe: true}, r.tk, "caller %d", i)
		assert.Equal(t, tr(halfOpen, probing), r.step.Transition, "caller %d", i)
	}
	assert.Equal(t, 1, probes, "exactly one of %d callers becomes the probe", callers)
	assert.Equal(t, probing, f.m.Snapshot().State)
	assert.Equal(t, gen+1, f.m.Snapshot().Gen, "one transition, however many callers")
}

func TestMachineTripsOnceAmongManyCallers(t *testing.T) {
	const callers = 200
	// Every failure makes this counter say "trip": the compare-and-swap
	// alone must make the trip happen once.
	m, err := machine.NewMachine("svc", breaker.FailureRate{Rate: 0.5, Window: callers, MinCalls: 1}, t0)
	require.NoError(t, err)
	tickets := make([]machine.Ticket, callers)
	for i := range tickets {
		tickets[i], _, _ = m.Acquire(t0)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		trips []machine.Step
	)
	start := make(chan struct{})
	for _, tk := range tickets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if trip, _ := m.Record(tk, classify.Failure, t0); trip {
				if step, ok := m.Trip(tk.Gen, classify.Failure, nil, t0); ok {
					mu.Lock()
					trips = append(trips, step)
					mu.Unlock()
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Len(t, trips, 1, "exactly one trip among %d failing callers", callers)
	assert.Equal(t, tr(closed, open), trips[0].Transition)
	assert.Equal(t, open, m.Snapshot().State)
}

// A caller that passed the generation check of one closed period, and was
// then held up while the breaker went round to closed again, records into
// its own period's counter: the new period does not see that outcome.
func TestMachineLateRecordStaysInItsPeriod(t *testing.T) {
	m, err := machine.NewMachine("svc", breaker.Consecutive{Failures: 2}, t0)
	require.NoError(t, err)
	late, _, _ := m.Acquire(t0)
	old := m.Current(late) // the held-up caller has its period's counter
	require.NotNil(t, old)

	for range 2 {
		tk, _, _ := m.Acquire(t0)
		if trip, _ := m.Record(tk, classify.Failure, t0); trip {
			_, ok := m.Trip(tk.Gen, classify.Failure, nil, t0)
			require.True(t, ok)
		}
	}
	require.Equal(t, open, m.Snapshot().State)
	m.Expire(m.Snapshot().Gen, t0.Add(time.Second))
	probe, _, _ := m.Acquire(t0.Add(time.Second))
	_, r := m.EndProbe(probe, classify.Success, nil, t0.Add(time.Second))
	require.Equal(t, machine.Counted, r)
	require.Equal(t, closed, m.Snapshot().State)

	old.Record(classify.Failure, t0) // lands now, in the old period
	tk, _, _ := m.Acquire(t0.Add(2 * time.Second))
	trip, _ := m.Record(tk, classify.Failure, t0.Add(2*time.Second))
	assert.False(t, trip, "one failure of the new period, and the old period's late one, must not trip Failures: 2")
	tk, _, _ = m.Acquire(t0.Add(2 * time.Second))
	trip, _ = m.Record(tk, classify.Failure, t0.Add(2*time.Second))
	assert.True(t, trip, "the second failure of the new period trips")
}

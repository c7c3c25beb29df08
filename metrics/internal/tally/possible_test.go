package tally_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/machine"
	"github.com/fusebox-go/fusebox/metrics/internal/tally"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 2, 15, 4, 0, 0, time.UTC)

// walker drives a machine the way the manager does, with the tickets it was
// given.
type walker struct {
	m      *machine.Machine
	now    time.Time
	closed machine.Ticket // the last ticket of a closed-state call
	probe  machine.Ticket // the last probe's ticket
}

// input is one thing that can happen to a breaker; it returns the step the
// machine made, if any.
type input struct {
	name string
	do   func(w *walker) (machine.Step, bool)
}

// localInputs is everything the manager does to the machine of a breaker
// kept in its process.
var localInputs = []input{
	{"acquire", func(w *walker) (machine.Step, bool) {
		tk, step, oe := w.m.Acquire(w.now)
		if oe != nil || tk == (machine.Ticket{}) {
			return machine.Step{}, false
		}
		if tk.Probe {
			w.probe = tk
			return step, true
		}
		w.closed = tk
		return machine.Step{}, false
	}},
	{"release a closed call: failure", func(w *walker) (machine.Step, bool) {
		if trip, r := w.m.Record(w.closed, classify.Failure, w.now); trip && r == machine.Counted {
			return w.m.Trip(w.closed.Gen, classify.Failure, nil, w.now)
		}
		return machine.Step{}, false
	}},
	{"release a closed call: success", func(w *walker) (machine.Step, bool) {
		w.m.Record(w.closed, classify.Success, w.now)
		return machine.Step{}, false
	}},
	{"release the probe: success", endProbe(classify.Success)},
	{"release the probe: failure", endProbe(classify.Failure)},
	{"release the probe: ignore", endProbe(classify.Ignore)},
	{"the timer of the current state ends", func(w *walker) (machine.Step, bool) {
		w.now = w.now.Add(time.Hour)
		return w.m.Expire(w.m.Snapshot().Gen, w.now)
	}},
	{"ForceOpen", func(w *walker) (machine.Step, bool) { return w.m.ForceOpen(w.now) }},
	{"Reset", func(w *walker) (machine.Step, bool) { return w.m.Reset(w.now, breaker.CauseReset) }},
	{"a supervisor's restart", func(w *walker) (machine.Step, bool) { return w.m.Reset(w.now, breaker.CauseRestart) }},
}

func endProbe(o classify.Outcome) func(w *walker) (machine.Step, bool) {
	return func(w *walker) (machine.Step, bool) {
		step, r := w.m.EndProbe(w.probe, o, nil, w.now)
		return step, r == machine.Counted
	}
}

// mirrorInputs are what a shared breaker adds: following the fleet into
// any state, forced open or not.
var mirrorInputs = func() []input {
	var in []input
	for _, st := range []breaker.State{breaker.Closed, breaker.Open, breaker.HalfOpen, breaker.Probing} {
		for _, forced := range []bool{false, true} {
			if forced && st != breaker.Open {
				continue
			}
			in = append(in, input{fmt.Sprintf("mirror %v (forced %v)", st, forced), func(w *walker) (machine.Step, bool) {
				return w.m.Mirror(w.m.Snapshot().Gen, st, time.Time{}, forced, time.Time{}, nil, w.now)
			}})
		}
	}
	return in
}()

// reachable explores every sequence of inputs from a new breaker, one
// abstract state (the machine's state, whether it is forced, and whether
// the tickets held are current) at a time, and returns every transition
// between two different states that some sequence makes.
func reachable(t *testing.T, inputs []input) map[breaker.Transition]string {
	t.Helper()
	type key struct {
		state         breaker.State
		forced        bool
		closed, probe bool
	}
	replay := func(path []int) *walker {
		m, err := machine.NewMachine("b", breaker.Consecutive{Failures: 1}, t0)
		require.NoError(t, err)
		w := &walker{m: m, now: t0}
		for _, i := range path {
			inputs[i].do(w)
		}
		return w
	}
	keyOf := func(w *walker) key {
		s := w.m.Snapshot()
		return key{s.State, s.Forced, w.closed.Gen == s.Gen && s.State == breaker.Closed, w.probe.Gen == s.Gen && s.State == breaker.Probing}
	}
	made := map[breaker.Transition]string{}
	seen := map[key]bool{keyOf(replay(nil)): true}
	queue := [][]int{nil}
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		for i := range inputs {
			w := replay(path)
			step, ok := inputs[i].do(w)
			next := append(append([]int(nil), path...), i)
			if ok && step.From != step.To {
				if _, found := made[step.Transition]; !found {
					made[step.Transition] = describe(inputs, next)
				}
			}
			if k := keyOf(w); !seen[k] {
				seen[k] = true
				queue = append(queue, next)
			}
		}
	}
	return made
}

func describe(inputs []input, path []int) string {
	s := ""
	for i, p := range path {
		if i > 0 {
			s += ", "
		}
		s += inputs[p].name
	}
	return s
}

func set(trs []breaker.Transition) map[breaker.Transition]bool {
	out := map[breaker.Transition]bool{}
	for _, tr := range trs {
		out[tr] = true
	}
	return out
}

// TestLocalIsWhatTheMachineMakes derives the transitions a local breaker
// can make from the state machine itself, every input the manager gives
// it from every state it can reach, and checks that Local is exactly
// those: none is exported that cannot happen, none that can is missing.
func TestLocalIsWhatTheMachineMakes(t *testing.T) {
	made := reachable(t, localInputs)
	for tr, how := range made {
		assert.True(t, set(tally.Local)[tr], "%v happens (%s), and is not in Local", tr, how)
	}
	for _, tr := range tally.Local {
		assert.Contains(t, made, tr, "%v is in Local, and no sequence of inputs makes it", tr)
	}
	assert.Len(t, tally.Local, len(set(tally.Local)), "no transition twice")
}

// TestSharedIsWhatTheMachineMakes: with the mirror's moves, every pair of
// different states happens, and Shared is all of them.
func TestSharedIsWhatTheMachineMakes(t *testing.T) {
	made := reachable(t, append(append([]input(nil), localInputs...), mirrorInputs...))
	assert.Len(t, made, 12, "every pair of different states")
	assert.Equal(t, set(tally.Shared), set(keys(made)))
	assert.Len(t, tally.Shared, 12)
	assert.Equal(t, tally.Local, tally.Possible(false))
	assert.Equal(t, tally.Shared, tally.Possible(true))
}

func keys(m map[breaker.Transition]string) []breaker.Transition {
	var out []breaker.Transition
	for tr := range m {
		out = append(out, tr)
	}
	return out
}

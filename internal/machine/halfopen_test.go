package machine_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/machine"
)

// halfOpenAt ends the open period by hand at now (Machine.HalfOpen).
func halfOpenAt(now time.Time) input {
	return input{
		desc: fmt.Sprintf("HalfOpen(%s)", when(now)),
		apply: func(f *fixture) (machine.Step, bool, result) {
			step, _, ok := f.m.HalfOpen(f.m.Snapshot().Gen, now)
			return step, ok, result{}
		},
	}
}

func TestMachineHalfOpen(t *testing.T) {
	two := breaker.Consecutive{Failures: 2}
	declined := func(s breaker.State) result { return result{State: s, Declined: true} }
	tests := []struct {
		name  string
		steps []step
	}{
		{"open: the next call is the probe, and the old timer is stale", append(tripped(),
			step{halfOpenAt(at(5 * time.Second)), moved(open, halfOpen, breaker.CauseHalfOpen, false)},
			step{expire(-1, at(32*time.Second)), stays(halfOpen)},
			step{acquire("p", at(6*time.Second)), moved(halfOpen, probing, breaker.CauseProbe, true)},
			step{acquire("q", at(6*time.Second)), declined(probing)},
			step{release("p", classify.Success, at(7*time.Second)), moved(probing, closed, breaker.CauseProbe, false)},
		)},
		{"a failed probe after it opens for a period, as after a timer", append(tripped(),
			step{halfOpenAt(at(5 * time.Second)), moved(open, halfOpen, breaker.CauseHalfOpen, false)},
			step{acquire("p", at(6*time.Second)), moved(halfOpen, probing, breaker.CauseProbe, true)},
			step{release("p", classify.Failure, at(7*time.Second)), moved(probing, open, breaker.CauseProbe, true)},
		)},
		{"closed: refused", []step{
			{halfOpenAt(at(0)), stays(closed)},
		}},
		{"half_open: refused", append(tripped(),
			step{expire(0, at(32*time.Second)), moved(open, halfOpen, breaker.CauseTimer, false)},
			step{halfOpenAt(at(33 * time.Second)), stays(halfOpen)},
		)},
		{"probing: refused", append(probingAt(),
			step{halfOpenAt(at(34 * time.Second)), stays(probing)},
		)},
		{"forced open: refused", []step{
			{forceOpen(at(0)), moved(closed, open, breaker.CauseForceOpen, false)},
			{halfOpenAt(at(time.Second)), stays(open)},
		}},
		{"another generation: refused", append(tripped(),
			step{input{desc: "HalfOpen(gen-1)", apply: func(f *fixture) (machine.Step, bool, result) {
				step, _, ok := f.m.HalfOpen(f.m.Snapshot().Gen-1, at(5*time.Second))
				return step, ok, result{}
			}}, stays(open)},
		)},
		{"halted: refused", append(tripped(),
			step{halt(), stays(open)},
			step{halfOpenAt(at(5 * time.Second)), stays(open)},
		)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { run(t, two, tt.steps) })
	}
}

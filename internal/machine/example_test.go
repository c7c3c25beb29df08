package machine_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/machine"
)

// A whole cycle of a breaker, driven by hand with explicit instants: it
// trips on the second failure in a row, its open period ends, one caller
// probes, and the probe's success closes it. A driver such as package
// manager does the same with a clock and timers.
func ExampleMachine() {
	start := time.Date(2026, 1, 2, 15, 4, 0, 0, time.UTC)
	m, err := machine.NewMachine("payments", breaker.Consecutive{Failures: 2}, start)
	if err != nil {
		panic(err)
	}

	// release reports a closed-state call's outcome and trips the breaker
	// when the strategy says so.
	release := func(t machine.Ticket, o classify.Outcome, now time.Time) {
		if trip, _ := m.Record(t, o, now); trip {
			step, _ := m.Trip(t.Gen, o, nil, now)
			fmt.Println(step.Transition, "needs a timer:", step.NeedsTimer())
			// The recovery policy would say for how long; say 30s.
			m.SetUntil(step.Gen, now.Add(30*time.Second))
		}
	}
	for i := range 2 {
		now := start.Add(time.Duration(i) * time.Second)
		t, _, _ := m.Acquire(now)
		release(t, classify.Failure, now)
	}

	_, _, declined := m.Acquire(start.Add(5 * time.Second))
	fmt.Println(declined, errors.Is(declined, breaker.ErrOpen))

	// The open period's timer fires.
	step, _ := m.Expire(m.Snapshot().Gen, start.Add(31*time.Second))
	fmt.Println(step.Transition)

	// The first caller becomes the probe; the others are declined.
	probe, step, _ := m.Acquire(start.Add(32 * time.Second))
	fmt.Println(step.Transition, "probe:", probe.Probe)
	_, _, declined = m.Acquire(start.Add(32 * time.Second))
	fmt.Println(declined.State)

	step, _ = m.EndProbe(probe, classify.Success, nil, start.Add(33*time.Second))
	fmt.Println(step.Transition)
	// Output:
	// closed->open needs a timer: true
	// fusebox: breaker "payments" is open until 2026-01-02T15:04:31Z true
	// open->half_open
	// half_open->probing probe: true
	// probing
	// probing->closed
}

// A probe whose outcome comes after its time ran out changes nothing: the
// breaker went back to half_open and another caller may probe.
func ExampleMachine_staleProbe() {
	start := time.Date(2026, 1, 2, 15, 4, 0, 0, time.UTC)
	m, _ := machine.NewMachine("search", breaker.Consecutive{Failures: 1}, start)

	t, _, _ := m.Acquire(start)
	m.Record(t, classify.Failure, start)
	m.Trip(t.Gen, classify.Failure, nil, start)
	m.Expire(m.Snapshot().Gen, start.Add(time.Minute))
	probe, _, _ := m.Acquire(start.Add(time.Minute))

	step, _ := m.Expire(probe.Gen, start.Add(2*time.Minute)) // the probe timer
	fmt.Println(step.Transition)
	_, r := m.EndProbe(probe, classify.Success, nil, start.Add(3*time.Minute))
	fmt.Println(r == machine.Stale, m.Snapshot().State)
	// Output:
	// probing->half_open
	// true half_open
}

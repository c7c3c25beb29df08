package breaker_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
)

// A whole cycle of a breaker, driven by hand with explicit instants: it
// trips on the second failure in a row, its open period ends, one caller
// probes, and the probe's success closes it. A driver such as package
// manager does the same with a clock and timers.
func ExampleMachine() {
	start := time.Date(2026, 1, 2, 15, 4, 0, 0, time.UTC)
	m, err := breaker.NewMachine("payments", breaker.Consecutive{Failures: 2}, start)
	if err != nil {
		panic(err)
	}

	// release reports a closed-state call's outcome and trips the breaker
	// when the strategy says so.
	release := func(t breaker.Ticket, o classify.Outcome, now time.Time) {
		if trip, _ := m.Record(t, o, now); trip {
			step, _ := m.Trip(t.Gen, o, now)
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

	step, _ = m.EndProbe(probe, classify.Success, start.Add(33*time.Second))
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
	m, _ := breaker.NewMachine("search", breaker.Consecutive{Failures: 1}, start)

	t, _, _ := m.Acquire(start)
	m.Record(t, classify.Failure, start)
	m.Trip(t.Gen, classify.Failure, start)
	m.Expire(m.Snapshot().Gen, start.Add(time.Minute))
	probe, _, _ := m.Acquire(start.Add(time.Minute))

	step, _ := m.Expire(probe.Gen, start.Add(2*time.Minute)) // the probe timer
	fmt.Println(step.Transition)
	_, r := m.EndProbe(probe, classify.Success, start.Add(3*time.Minute))
	fmt.Println(r == breaker.Stale, m.Snapshot().State)
	// Output:
	// probing->half_open
	// true half_open
}

// Consecutive trips on the Failures-th failure in a row; a success starts
// the count again and an ignored call leaves it as it is.
func ExampleConsecutive() {
	c, err := breaker.Consecutive{Failures: 3}.NewCounter()
	if err != nil {
		panic(err)
	}
	var now time.Time // count-based: the time is not read
	for _, o := range []classify.Outcome{
		classify.Failure, classify.Failure, classify.Success,
		classify.Failure, classify.Ignore, classify.Failure, classify.Failure,
	} {
		fmt.Println(o, c.Record(o, now))
	}
	// Output:
	// failure false
	// failure false
	// success false
	// failure false
	// ignore false
	// failure false
	// failure true
}

// FailureRate looks at the last Window calls; with MinCalls zero, the
// window must be full before the breaker may trip.
func ExampleFailureRate() {
	c, err := breaker.FailureRate{Rate: 0.5, Window: 4}.NewCounter()
	if err != nil {
		panic(err)
	}
	var now time.Time
	var trips []bool
	for _, o := range []classify.Outcome{
		classify.Failure, classify.Failure, // 2 of 2, but the window is not full
		classify.Success, classify.Success, // 2 of 4: a success never trips
		classify.Success, classify.Success, // the two failures leave the window
		classify.Failure, classify.Failure, // 2 of 4
	} {
		trips = append(trips, c.Record(o, now))
	}
	fmt.Println(trips)

	_, err = breaker.FailureRate{Rate: 1.5, Window: 4}.NewCounter()
	fmt.Println(err)
	// Output:
	// [false false false false false false false true]
	// breaker.FailureRate.Rate must be in (0, 1], got 1.5
}

// TimeWindow looks at the calls of the last Period, in buckets that leave
// the window one at a time.
func ExampleTimeWindow() {
	start := time.Date(2026, 1, 2, 15, 4, 0, 0, time.UTC)
	c, err := breaker.TimeWindow{Rate: 0.5, Period: 10 * time.Second, Buckets: 10, MinCalls: 3}.NewCounter()
	if err != nil {
		panic(err)
	}
	record := func(after time.Duration, o classify.Outcome) {
		fmt.Printf("%v at +%v: trip %v\n", o, after, c.Record(o, start.Add(after)))
	}
	record(0, classify.Failure)
	record(time.Second, classify.Failure)
	record(12*time.Second, classify.Failure) // the first two have left the window
	record(13*time.Second, classify.Success)
	record(14*time.Second, classify.Failure) // 2 of 3 within the last 10s
	// Output:
	// failure at +0s: trip false
	// failure at +1s: trip false
	// failure at +12s: trip false
	// success at +13s: trip false
	// failure at +14s: trip true
}

func ExampleOpenError() {
	err := fmt.Errorf("charge card: %w", &breaker.OpenError{
		Name:  "payments",
		State: breaker.Open,
		Until: time.Date(2026, 1, 2, 15, 4, 30, 0, time.UTC),
	})
	fmt.Println(errors.Is(err, breaker.ErrOpen))

	var oe *breaker.OpenError
	if errors.As(err, &oe) {
		fmt.Println(oe.Name, oe.State, oe.Until.Format(time.Kitchen))
	}
	fmt.Println(err)
	// Output:
	// true
	// payments open 3:04PM
	// charge card: fusebox: breaker "payments" is open until 2026-01-02T15:04:30Z
}

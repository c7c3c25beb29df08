package breaker_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
)

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
		classify.Failure, classify.Success, // 1 of 2, but the window is not full
		classify.Success, classify.Success, // 1 of 4
		classify.Failure, // 1 of 4: the first failure left the window
		classify.Failure, // 2 of 4
	} {
		trips = append(trips, c.Record(o, now))
	}
	fmt.Println(trips)

	// The threshold is checked after every call: a success that fills
	// the window can trip the breaker.
	c, _ = breaker.FailureRate{Rate: 0.5, Window: 4}.NewCounter()
	trips = nil
	for _, o := range []classify.Outcome{classify.Failure, classify.Failure, classify.Success, classify.Success} {
		trips = append(trips, c.Record(o, now))
	}
	fmt.Println(trips)

	_, err = breaker.FailureRate{Rate: 1.5, Window: 4}.NewCounter()
	fmt.Println(err)
	// Output:
	// [false false false false false true]
	// [false false false true]
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

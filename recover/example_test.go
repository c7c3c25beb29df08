package recover_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/recover"
)

// ask calls Init, then Timeout for each transition in turn, threading the
// state as a manager does, and prints each duration.
func ask(r recover.Recover, transitions ...breaker.Transition) {
	state, err := r.Init()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, tr := range transitions {
		c := recover.Context{Name: "payments", Transition: tr}
		if c.Opening() {
			c.Outcome = classify.Failure
		}
		var d time.Duration
		d, state = r.Timeout(c, state)
		fmt.Printf("%-18s %v\n", tr, d)
	}
}

var (
	trip       = breaker.Transition{From: breaker.Closed, To: breaker.Open}
	probeStart = breaker.Transition{From: breaker.HalfOpen, To: breaker.Probing}
	probeFail  = breaker.Transition{From: breaker.Probing, To: breaker.Open}
)

// The zero BasicTimeout keeps a breaker open 30 seconds and gives each
// probe as long.
func ExampleBasicTimeout() {
	ask(recover.BasicTimeout{}, trip, probeStart)
	ask(recover.BasicTimeout{Open: 5 * time.Second, ProbeTimeout: time.Second}, trip, probeStart, probeFail)
	// Output:
	// closed->open       30s
	// half_open->probing 30s
	// closed->open       5s
	// half_open->probing 1s
	// probing->open      5s
}

// Each failed probe doubles the open period, up to Max; the first trip
// after a recovery starts again from Initial.
func ExampleExponential() {
	ask(recover.Exponential{Initial: time.Second, Max: 5 * time.Second},
		trip, probeStart, probeFail, probeStart, probeFail, probeStart, probeFail,
		trip, // a probe succeeded meanwhile, and the breaker tripped again
	)
	// Output:
	// closed->open       1s
	// half_open->probing 1s
	// probing->open      2s
	// half_open->probing 1s
	// probing->open      4s
	// half_open->probing 1s
	// probing->open      5s
	// closed->open       1s
}

// With Jitter, each open period is scaled by a random factor in
// [1-Jitter, 1]; a seeded Rand makes the periods reproducible.
func ExampleExponential_jitter() {
	policy := recover.Exponential{
		Initial: time.Second,
		Jitter:  0.5,
		Rand:    rand.New(rand.NewPCG(1, 2)),
	}
	state, _ := policy.Init()
	for i, tr := range []breaker.Transition{trip, probeFail, probeFail} {
		var d time.Duration
		d, state = policy.Timeout(recover.Context{Transition: tr, Outcome: classify.Failure}, state)
		base := time.Second << i
		fmt.Println(tr, d >= base/2 && d <= base)
	}
	// Output:
	// closed->open true
	// probing->open true
	// probing->open true
}

// Invalid options fail Init with a *breaker.ConfigError naming the field.
func ExampleExponential_invalid() {
	_, err := recover.Exponential{Initial: time.Second, Max: time.Millisecond}.Init()
	var ce *breaker.ConfigError
	fmt.Println(errors.As(err, &ce), ce.Field)
	fmt.Println(err)
	// Output:
	// true recover.Exponential.Max
	// recover.Exponential.Max must not be below Initial (1s), got 1ms
}

// A policy written as two functions: open periods and probe times that
// double at every transition, starting at one second. The state is the
// next duration.
func ExampleFunc() {
	doubling := recover.Func(
		func() (time.Duration, error) { return time.Second, nil },
		func(_ recover.Context, d time.Duration) (time.Duration, time.Duration) { return d, 2 * d },
	)
	ask(doubling, trip, probeStart, probeFail, probeStart)
	// Output:
	// closed->open       1s
	// half_open->probing 2s
	// probing->open      4s
	// half_open->probing 8s
}

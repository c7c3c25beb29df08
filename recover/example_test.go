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
		if c.Transition.To == breaker.Open {
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

// A policy written as two functions: an open period that doubles every
// time the breaker opens, starting at one second, and probes that may
// always run one second. The state is the next open period; a probe's
// timeout leaves it as it is.
func ExampleFunc() {
	doubling := recover.Func(
		func() (time.Duration, error) { return time.Second, nil },
		func(c recover.Context, open time.Duration) (time.Duration, time.Duration) {
			if c.Transition.To != breaker.Open {
				return time.Second, open // a probe may run 1s; the open period stays
			}
			return open, 2 * open
		},
	)
	ask(doubling, trip, probeStart, probeFail, probeStart, probeFail)
	// Output:
	// closed->open       1s
	// half_open->probing 1s
	// probing->open      2s
	// half_open->probing 1s
	// probing->open      4s
}

// rateLimited is the error of a service that said, as it refused a call,
// how long to wait: the kind of error a client library returns for an HTTP
// 429 with Retry-After, or a gRPC status with RetryInfo.
type rateLimited struct{ wait time.Duration }

func (e *rateLimited) Error() string             { return "rate limited" }
func (e *rateLimited) RetryAfter() time.Duration { return e.wait }

// WithHints keeps a breaker open as long as the error that opened it asks,
// up to a cap; an error without a hint leaves the policy's period as it is.
func ExampleWithHints() {
	policy := recover.WithHints(recover.BasicTimeout{Open: 5 * time.Second}, 10*time.Minute)
	state, _ := policy.Init()
	for _, err := range []error{
		errors.New("connection refused"),                           // no hint: the policy's 5s
		&rateLimited{wait: time.Minute},                            // a hint longer than 5s
		fmt.Errorf("fetch: %w", &rateLimited{wait: 2 * time.Hour}), // wrapped, and capped
	} {
		var d time.Duration
		d, state = policy.Timeout(recover.Context{Transition: trip, Outcome: classify.Failure, Err: err}, state)
		fmt.Printf("%-40q open for %v\n", err.Error(), d)
	}
	// Output:
	// "connection refused"                     open for 5s
	// "rate limited"                           open for 1m0s
	// "fetch: rate limited"                    open for 10m0s
}

// quotaError says when the caller's quota resets.
type quotaError struct{ resets time.Time }

func (e *quotaError) Error() string { return "quota exceeded" }

// A policy of its own can read the error that opened the breaker
// (Context.Err) directly: here a quota error that says when the quota
// resets keeps the breaker open until then.
func ExampleContext_err() {
	policy := recover.Func(nil, func(c recover.Context, _ struct{}) (time.Duration, struct{}) {
		var q *quotaError
		if c.Transition.To == breaker.Open && errors.As(c.Err, &q) {
			return q.resets.Sub(c.At), struct{}{}
		}
		return 5 * time.Second, struct{}{}
	})
	state, _ := policy.Init()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	d, _ := policy.Timeout(recover.Context{Transition: trip, At: at, Err: &quotaError{resets: at.Add(42 * time.Minute)}}, state)
	fmt.Println(d)
	// Output: 42m0s
}

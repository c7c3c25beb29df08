package bench_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/sony/gobreaker/v2"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
)

// A program moving from another library may call the builtin recover() in
// this file, so it imports package recover under another name, as the
// package's doc recommends.
import fbrecover "github.com/fusebox-go/fusebox/recover"

// The code of docs/from-gobreaker.md: one program written for
// sony/gobreaker v2 and the same program on fusebox, driven through the
// same calls, printing what each breaker does. The examples are tests:
// go test compares what they print with their Output.

// errDown is the dependency failing; errNotFound is an answer, not a
// failure of the dependency.
var (
	errDown     = errors.New("payment service unavailable")
	errNotFound = errors.New("no such order")
)

// gobreakerPayments is the gobreaker side: a breaker that trips on the
// fifth failure in a row, stays open for timeout, counts errNotFound as a
// success and logs its changes.
func gobreakerPayments(timeout time.Duration, log func(string)) *gobreaker.CircuitBreaker[string] {
	return gobreaker.NewCircuitBreaker[string](gobreaker.Settings{
		Name:        "payments",
		MaxRequests: 1, // calls let through half-open; all must succeed to close
		Interval:    0, // never clear the counts while closed
		Timeout:     timeout,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= 5
		},
		OnStateChange: func(name string, from, to gobreaker.State) {
			log(fmt.Sprintf("%s: %s->%s", name, from, to))
		},
		IsSuccessful: func(err error) bool {
			return err == nil || errors.Is(err, errNotFound)
		},
	})
}

// fuseboxPayments is the same breaker on fusebox: Settings become a
// Config, ReadyToTrip a Strategy, Timeout a Recover, IsSuccessful a
// Classifier (which may also say Ignore, as gobreaker's IsExcluded does).
func fuseboxPayments(m *manager.Manager) (*manager.Breaker, error) {
	return m.Register("payments", manager.Config{
		Strategy: breaker.Consecutive{Failures: 5},
		Recover:  fbrecover.BasicTimeout{Open: 30 * time.Second},
		Classify: func(err error) classify.Outcome {
			switch {
			case err == nil, errors.Is(err, errNotFound):
				return classify.Success
			case errors.Is(err, context.Canceled):
				return classify.Ignore
			}
			return classify.Failure
		},
	})
}

// logTransitions is OnStateChange: the manager's events, in order, on a
// goroutine of the caller's. A subscriber never slows the breaker down:
// a full buffer drops events, and counts them.
func logTransitions(m *manager.Manager, log func(string)) (stop func()) {
	events, unsubscribe := m.Subscribe(64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range events {
			if e.Kind == manager.EventTransition {
				log(e.String()) // "payments: closed->open (trip)"
			}
		}
	}()
	return func() { unsubscribe(); <-done }
}

// charge is the call the breaker protects; fail says how it ends.
func charge(fail error) func() (string, error) {
	return func() (string, error) {
		if fail != nil {
			return "", fail
		}
		return "receipt-42", nil
	}
}

// Execute becomes Call (or Do, for a function that returns only an
// error); ErrOpenState and ErrTooManyRequests become breaker.ErrOpen.
func Example_gobreaker() {
	var logged []string
	log := func(s string) { logged = append(logged, s) }

	// gobreaker, on the real clock: a Timeout short enough that the
	// example does not wait long, long enough that it does not end
	// between two calls on a busy machine.
	cb := gobreakerPayments(250*time.Millisecond, log)
	for range 5 {
		_, err := cb.Execute(charge(errDown))
		fmt.Println("gobreaker:", err)
	}
	_, err := cb.Execute(charge(nil))
	fmt.Println("gobreaker:", err, errors.Is(err, gobreaker.ErrOpenState))
	time.Sleep(300 * time.Millisecond) // the open period ends
	receipt, err := cb.Execute(charge(nil))
	fmt.Println("gobreaker:", receipt, err, cb.State())

	// fusebox, on a mock clock, which the manager's Sync makes exact.
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()
	stop := logTransitions(m, log)
	b, err := fuseboxPayments(m)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	call := func(fail error) (string, error) {
		return manager.Call(ctx, b, func(context.Context) (string, error) { return charge(fail)() })
	}
	for range 5 {
		_, err := call(errDown)
		fmt.Println("fusebox:", err)
	}
	m.Sync() // the manager has set the open period's end
	_, err = call(nil)
	var open *breaker.OpenError
	if errors.As(err, &open) { // errors.Is(err, breaker.ErrOpen) holds too
		fmt.Println("fusebox:", open.State, "for", open.Until.Sub(mock.Now()), "more, after", open.Cause)
	}
	mock.Add(30 * time.Second) // the open period ends
	m.Sync()
	receipt, err = call(nil)
	fmt.Println("fusebox:", receipt, err, b.State())
	_, err = call(errNotFound) // an answer: a success
	fmt.Println("fusebox:", err, b.State())

	m.Sync()
	stop()
	for _, l := range logged {
		fmt.Println(l)
	}
	// Output:
	// gobreaker: payment service unavailable
	// gobreaker: payment service unavailable
	// gobreaker: payment service unavailable
	// gobreaker: payment service unavailable
	// gobreaker: payment service unavailable
	// gobreaker: circuit breaker is open true
	// gobreaker: receipt-42 <nil> closed
	// fusebox: payment service unavailable
	// fusebox: payment service unavailable
	// fusebox: payment service unavailable
	// fusebox: payment service unavailable
	// fusebox: payment service unavailable
	// fusebox: open for 30s more, after payment service unavailable
	// fusebox: receipt-42 <nil> closed
	// fusebox: no such order closed
	// payments: closed->open
	// payments: open->half-open
	// payments: half-open->closed
	// payments: closed->open (trip)
	// payments: open->half_open (timer)
	// payments: half_open->probing (probe)
	// payments: probing->closed (probe)
}

// gobreaker's two-step breaker, Allow and done(err), is Acquire and
// Permit.Release(err): a permit for a call whose outcome is known later,
// elsewhere (a callback, a stream that ends).
func Example_gobreakerTwoStep() {
	tscb := gobreaker.NewTwoStepCircuitBreaker[string](gobreaker.Settings{Name: "payments"})
	done, err := tscb.Allow()
	if err != nil {
		return // gobreaker.ErrOpenState or gobreaker.ErrTooManyRequests
	}
	done(nil) // the call succeeded
	fmt.Println("gobreaker:", tscb.State(), tscb.Counts().TotalSuccesses)

	m := manager.Start(manager.Options{})
	defer m.Stop()
	b, err := m.Register("payments", manager.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	permit, err := b.Acquire(context.Background())
	if err != nil {
		return // errors.Is(err, breaker.ErrOpen)
	}
	permit.Release(nil) // the call succeeded; classified by Config.Classify
	fmt.Println("fusebox:", b.State(), b.Stats().Successes)
	// Output:
	// gobreaker: closed 1
	// fusebox: closed 1
}

package bench_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
)

// A program moving from another library may call the builtin recover() in
// this file, so it imports package recover under another name, as the
// package's doc recommends.
import fbrecover "github.com/fusebox-go/fusebox/recover"

// The code of docs/from-failsafe-go.md: one program written for
// failsafe-go's circuit breaker and the same program on fusebox, driven
// through the same calls.

// failsafePayments is the failsafe-go side: the builder's handle
// condition (errNotFound is an answer, not a failure), a threshold of 5
// failures in a row, a delay and a listener; one trial in half-open,
// whose success closes the breaker and whose failure re-opens it.
func failsafePayments(delay time.Duration, log func(string)) circuitbreaker.CircuitBreaker[string] {
	return circuitbreaker.NewBuilder[string]().
		HandleIf(func(_ string, err error) bool {
			return err != nil && !errors.Is(err, errNotFound)
		}).
		WithFailureThreshold(5).
		WithSuccessThreshold(1).
		WithDelay(delay).
		OnStateChanged(func(e circuitbreaker.StateChangedEvent) {
			log(fmt.Sprintf("payments: %s->%s", e.OldState, e.NewState))
		}).
		Build()
}

// fuseboxPaymentsLike is the same breaker on fusebox: the builder's
// calls become the fields of one Config, checked once by Register, which
// names the breaker and the field in its error.
func fuseboxPaymentsLike(m *manager.Manager) (*manager.Breaker, error) {
	return m.Register("payments", manager.Config{
		Classify: func(err error) classify.Outcome { // HandleIf
			if err != nil && !errors.Is(err, errNotFound) {
				return classify.Failure
			}
			return classify.Success
		},
		Strategy: breaker.Consecutive{Failures: 5},          // WithFailureThreshold(5)
		Recover:  fbrecover.BasicTimeout{Open: time.Minute}, // WithDelay(time.Minute)
	})
}

// failsafe.With(cb).Get(fn) becomes manager.Call(ctx, b, fn), and Run
// becomes Do; circuitbreaker.ErrOpen becomes breaker.ErrOpen.
func Example_failsafe() {
	var logged []string
	log := func(s string) { logged = append(logged, s) }

	cb := failsafePayments(250*time.Millisecond, log)
	exec := failsafe.With[string](cb)
	for range 5 {
		_, err := exec.Get(charge(errDown))
		fmt.Println("failsafe:", err)
	}
	_, err := exec.Get(charge(nil))
	fmt.Println("failsafe:", err, errors.Is(err, circuitbreaker.ErrOpen))
	time.Sleep(300 * time.Millisecond) // the delay ends
	receipt, err := exec.Get(charge(nil))
	fmt.Println("failsafe:", receipt, err, cb.State())
	err = exec.Run(func() error { _, err := charge(errNotFound)(); return err })
	fmt.Println("failsafe:", err, cb.State())

	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()
	stop := logTransitions(m, log) // OnStateChanged
	b, err := fuseboxPaymentsLike(m)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for range 5 {
		_, err := manager.Call(ctx, b, func(context.Context) (string, error) { return charge(errDown)() })
		fmt.Println("fusebox:", err)
	}
	_, err = manager.Call(ctx, b, func(context.Context) (string, error) { return charge(nil)() })
	fmt.Println("fusebox:", errors.Is(err, breaker.ErrOpen))
	mock.Add(time.Minute) // the open period ends
	m.Sync()
	receipt, err = manager.Call(ctx, b, func(context.Context) (string, error) { return charge(nil)() })
	fmt.Println("fusebox:", receipt, err, b.State())
	err = b.Do(ctx, func(context.Context) error { _, err := charge(errNotFound)(); return err })
	fmt.Println("fusebox:", err, b.State())

	m.Sync()
	stop()
	for _, l := range logged {
		fmt.Println(l)
	}
	// Output:
	// failsafe: payment service unavailable
	// failsafe: payment service unavailable
	// failsafe: payment service unavailable
	// failsafe: payment service unavailable
	// failsafe: payment service unavailable
	// failsafe: circuit breaker open true
	// failsafe: receipt-42 <nil> closed
	// failsafe: no such order closed
	// fusebox: payment service unavailable
	// fusebox: payment service unavailable
	// fusebox: payment service unavailable
	// fusebox: payment service unavailable
	// fusebox: payment service unavailable
	// fusebox: true
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

// failsafe-go's standalone use, TryAcquirePermit and RecordError, is
// Acquire and Permit.Release(err); its manual Open, HalfOpen and Close
// are ForceOpen, HalfOpen and Reset, which a shared breaker applies for
// the whole fleet.
func Example_failsafeStandalone() {
	cb := circuitbreaker.NewBuilder[any]().WithFailureThreshold(5).Build()
	if cb.TryAcquirePermit() {
		cb.RecordError(nil) // the call succeeded
	}
	cb.Open()
	fmt.Println("failsafe:", cb.State(), cb.TryAcquirePermit())
	cb.Close()
	fmt.Println("failsafe:", cb.State())

	m := manager.Start(manager.Options{})
	defer m.Stop()
	b, err := m.Register("payments", manager.Config{Strategy: breaker.Consecutive{Failures: 5}})
	if err != nil {
		fmt.Println(err)
		return
	}
	if permit, err := b.Acquire(context.Background()); err == nil {
		permit.Release(nil) // the call succeeded
	}
	if err := b.ForceOpen(); err != nil {
		fmt.Println(err)
		return
	}
	_, err = b.Acquire(context.Background())
	fmt.Println("fusebox:", b.State(), err == nil)
	if err := b.Reset(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("fusebox:", b.State())
	// Output:
	// failsafe: open false
	// failsafe: closed
	// fusebox: open false
	// fusebox: closed
}

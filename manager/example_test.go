package manager_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// Start a manager, register a breaker, and call through it with Do. After
// the second failure in a row the breaker is open and declines calls at
// once, without calling the function.
func ExampleStart() {
	m := manager.Start(manager.Options{})
	defer m.Stop()

	b, err := m.Register("payments", manager.Config{
		Strategy: breaker.Consecutive{Failures: 2},
		Recover:  recover.BasicTimeout{Open: 10 * time.Second},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx := context.Background()
	charge := func(context.Context) error { return errors.New("connection refused") }
	for i := 1; i <= 3; i++ {
		err := b.Do(ctx, charge)
		if errors.Is(err, breaker.ErrOpen) {
			fmt.Printf("call %d: declined\n", i)
			continue
		}
		fmt.Printf("call %d: %v\n", i, err)
	}
	fmt.Println("state:", b.State())
	// Output:
	// call 1: connection refused
	// call 2: connection refused
	// call 3: declined
	// state: open
}

// Call is Do for a function that returns a value.
func ExampleCall() {
	m := manager.Start(manager.Options{})
	defer m.Stop()
	b, _ := m.Register("prices", manager.Config{})

	price, err := manager.Call(context.Background(), b, func(context.Context) (float64, error) {
		return 9.99, nil
	})
	fmt.Println(price, err)
	// Output:
	// 9.99 <nil>
}

// Acquire and Release are the lower-level form of Do, for calls that do not
// fit in one function. Release each permit exactly once: releasing it
// twice counts the call twice (see Permit.Release's example).
func ExampleBreaker_Acquire() {
	m := manager.Start(manager.Options{})
	defer m.Stop()
	b, _ := m.Register("search", manager.Config{})

	p, err := b.Acquire(context.Background())
	if err != nil {
		fmt.Println("declined:", err)
		return
	}
	// ... make the call ...
	p.Release(nil) // exactly once, with the call's error
	fmt.Println(b.Stats().Successes, "success")
	// Output:
	// 1 success
}

// A Permit is a value, and nothing stops it from being released twice (or
// a copy of it being released too): each release counts, so the call is
// counted twice, and a failure released twice counts twice towards a
// trip. Release each permit exactly once, as Do and Call do; a defer that
// releases as a failure must not run after the release of the call's
// error.
func ExamplePermit_Release_twice() {
	m := manager.Start(manager.Options{})
	defer m.Stop()
	b, _ := m.Register("search", manager.Config{Strategy: breaker.Consecutive{Failures: 2}})

	p, _ := b.Acquire(context.Background())
	p.Release(errors.New("timeout"))
	p.Release(errors.New("timeout")) // a mistake: the same call again
	m.Sync()
	st := b.Stats()
	fmt.Println(st.Calls, "calls,", st.Failures, "failures, now", b.State())
	// Output:
	// 2 calls, 2 failures, now open
}

// Subscribe receives every transition, with the outcome and cause that made
// it and the time on the manager's clock, here a mock clock.
func ExampleManager_Subscribe() {
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()
	events, unsubscribe := m.Subscribe(16)
	defer unsubscribe()
	t0 := mock.Now()

	b, _ := m.Register("inventory", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: 5 * time.Second},
	})
	ctx := context.Background()
	_ = b.Do(ctx, func(context.Context) error { return errors.New("timeout") })
	mock.Add(5 * time.Second)
	m.Sync()
	_ = b.Do(ctx, func(context.Context) error { return nil }) // the probe
	m.Sync()

	for range 4 {
		e := <-events
		fmt.Printf("%-9s %-20s outcome=%-7s cause=%-5s at +%v\n",
			e.Name, e.Transition, e.Outcome, e.Cause, e.At.Sub(t0))
	}
	// Output:
	// inventory closed->open         outcome=failure cause=trip  at +0s
	// inventory open->half_open      outcome=none    cause=timer at +5s
	// inventory half_open->probing   outcome=none    cause=probe at +5s
	// inventory probing->closed      outcome=success cause=probe at +5s
}

// A custom recovery policy written with recover.Func: every open period and
// every probe timeout is twice the one before, starting at one second, in
// the order the breaker asks for them.
func Example_customRecover() {
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()

	doubling := recover.Func(
		func() (time.Duration, error) { return time.Second, nil },
		func(_ recover.Context, d time.Duration) (time.Duration, time.Duration) { return d, 2 * d },
	)
	b, _ := m.Register("flaky", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  doubling,
	})
	ctx := context.Background()
	fail := func(context.Context) error { return errors.New("down") }

	// until prints how long the current state lasts, from a declined call.
	until := func() {
		m.Sync()
		var oe *breaker.OpenError
		if errors.As(b.Do(ctx, fail), &oe) {
			fmt.Printf("%-8s for %v\n", oe.State, oe.Until.Sub(mock.Now()))
		}
	}

	_ = b.Do(ctx, fail) // trips
	until()
	for range 2 {
		mock.Add(b.Stats().Until.Sub(mock.Now())) // to the end of the open period
		m.Sync()
		p, _ := b.Acquire(ctx) // the probe
		until()
		p.Release(errors.New("still down"))
		until()
	}
	// Output:
	// open     for 1s
	// probing  for 2s
	// open     for 4s
	// probing  for 8s
	// open     for 16s
}

// Testing code that uses a breaker: give the manager a mock clock, advance
// it with Add, and call Sync. After Sync every timer that is due has fired,
// so the test never sleeps.
func Example_testingWithAMockClock() {
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()
	b, _ := m.Register("db", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: 30 * time.Second},
	})
	_ = b.Do(context.Background(), func(context.Context) error { return errors.New("down") })
	fmt.Println("after the failure:", b.State())

	mock.Add(30*time.Second - time.Millisecond)
	m.Sync()
	fmt.Println("after 29.999s:", b.State())

	mock.Add(time.Millisecond)
	m.Sync()
	fmt.Println("after 30s:", b.State())
	// Output:
	// after the failure: open
	// after 29.999s: open
	// after 30s: half_open
}

// ForceOpen isolates a dependency by hand until Reset; no timer undoes it.
func ExampleBreaker_ForceOpen() {
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()
	b, _ := m.Register("legacy", manager.Config{})

	_ = b.ForceOpen()
	mock.Add(24 * time.Hour)
	m.Sync()
	fmt.Println("a day later:", b.State())
	_ = b.Reset()
	fmt.Println("after Reset:", b.State())
	// Output:
	// a day later: open
	// after Reset: closed
}

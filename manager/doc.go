// Package manager runs circuit breakers: one goroutine, the manager, owns
// the timers and the bookkeeping of every breaker registered with it, while
// the calls through those breakers never wait for it.
//
// # Using it
//
// Start a Manager, register a named breaker, and call through it:
//
//	m := manager.Start(manager.Options{})
//	defer m.Stop()
//	b, err := m.Register("payments", manager.Config{
//		Strategy: breaker.Consecutive{Failures: 5},
//		Recover:  recover.Exponential{Initial: time.Second, Max: time.Minute},
//	})
//	...
//	err = b.Do(ctx, func(ctx context.Context) error { return callPayments(ctx) })
//	if errors.Is(err, breaker.ErrOpen) { ... } // declined at once
//
// Acquire and Permit.Release are the lower-level form of Do; Call is the
// generic form for a function that returns a value.
//
// # How a call is handled
//
// Every breaker publishes its state as an immutable breaker.Snapshot behind
// an atomic pointer. Acquire in the closed state is one atomic load; a
// declined Acquire returns the *breaker.OpenError built for the current
// snapshot, so it allocates nothing. Release counts the outcome in per-breaker
// counters and in the strategy's lock-free counter. The one call whose
// outcome trips the breaker makes the transition itself, with a
// compare-and-swap, so the very next call is declined; it then tells the
// manager, which asks the breaker's recover.Recover how long the open period
// lasts and arms a timer. The probe in half_open is claimed the same way, by
// compare-and-swap, so exactly one caller wins it however many ask at once.
//
// The manager keeps one heap of deadlines and one clock timer for all its
// breakers, and handles every deadline that is due each time it wakes up.
//
// # Why a breaker opened
//
// The event of a transition to open carries the error of the call that
// opened it (Event.Err); so do the *breaker.OpenError of every call
// declined until the breaker closes (its Cause) and Stats.Cause. A breaker
// shared through a store says so in every process of the fleet: the
// opener's process name (Options.Name) and its error's text travel with
// the opening, and the other processes get a *breaker.OpenedError,
// "opened by web-7: dial tcp ...: connection refused", and
// Stats.OpenedBy.
//
// # A dry run
//
// A breaker registered with Config.DryRun decides, opens, probes and
// reports as usual, but declines no call: what it would have declined is
// let through and counted in Stats.WouldDecline, so a team can see what a
// breaker would do on its own traffic before it lets it act. A shared
// breaker in a dry run never makes a process that is not in one decline a
// call: it follows the fleet, but its outcomes, its trips and its probes
// stay its own (see Config.DryRun).
//
// # Testing
//
// Pass a mock clock, advance it, and call Sync: afterwards every timer that
// is due has fired, and State shows it.
//
//	mock := clock.NewMock()
//	m := manager.Start(manager.Options{Clock: mock})
//	...
//	mock.Add(time.Second)
//	m.Sync()
//
// # Callbacks
//
// Recover.Timeout runs on the manager's goroutine, and so does
// Recover.Init at a restart or a Reconfigure; Register runs Init on its
// caller's goroutine (a Group's breaker runs it on the manager's, when its
// first timer needs it). The Classifier and the Strategy's counter run on
// the caller's. None of them may
// call back into the manager (Register, Sync, Stop, ...), which would
// deadlock. A callback that runs longer than Options.Watchdog is logged,
// with the breaker's name and the callback's; calling the manager from a
// callback is the usual cause. While it runs, no breaker's timer fires.
// Stop waits for it at most Options.Watchdog from its start, then stops the
// manager without it.
//
// A panic in a callback the manager runs is recovered and logged, and the
// manager restarts: by default it calls Init again for every breaker and
// closes every breaker, keeping the registrations; with Options.RestartOne,
// it does so for the breaker whose callback panicked only. Too many restarts in a short time
// (Options.MaxRestarts within Options.RestartWindow) halt the manager for
// good: every breaker reports breaker.Halted, an EventHalted is published
// for each, and every call then gets ErrStopped, or, with Options.FailOpen,
// goes through unprotected (counted in Stats.Unprotected).
//
// Bad input is an error, never a panic: Register checks the name (1 to 256
// bytes of printable UTF-8) and every field of the Config, and Acquire, Do
// and Call refuse a nil context or function, with errors that name the
// breaker and what is wrong.
//
// Package recover's name shadows the builtin recover() in any file that
// imports it; this package keeps its panic guard in a file that does not.
package manager

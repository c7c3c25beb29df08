package breaker

import (
	"time"

	"github.com/fusebox-go/fusebox/classify"
)

// Strategy decides when a closed breaker trips. A Strategy is a
// configuration value, such as Consecutive{Failures: 5}; each breaker gets a
// Counter of its own from NewCounter.
type Strategy interface {
	// NewCounter validates the strategy and returns a fresh Counter for one
	// breaker. The error, a *ConfigError, names the field that is wrong.
	NewCounter() (Counter, error)
}

// Counter records the outcomes of the calls a closed breaker lets through,
// for one closed period: the breaker makes a new Counter, with
// Strategy.NewCounter, each time it closes.
//
// Record is called concurrently by every caller releasing a call, on the
// caller's goroutine, so it must be lock-free or nearly so and must not
// block. Record returns true from the outcome that reaches the threshold on;
// the breaker's compare-and-swap makes the trip happen once even if several
// calls return true together.
//
// A Counter that keeps a window of recent outcomes (those of FailureRate
// and TimeWindow, not Consecutive's) also has the method
//
//	Window(now time.Time) (calls, failures uint64)
//
// which returns the calls and failures in the window as of now (now is
// only read by counters whose UsesClock is true), so that the failure rate
// the strategy trips on can be shown (manager's Stats.WindowCalls and
// WindowFailures). It may be called concurrently with Record.
type Counter interface {
	// Record counts outcome o, observed at now, and reports whether the
	// breaker should trip. now is the zero time unless UsesClock is true.
	Record(o classify.Outcome, now time.Time) (trip bool)
	// UsesClock reports whether Record needs the current time. Count-based
	// counters return false, and callers then never read the clock for them.
	UsesClock() bool
}

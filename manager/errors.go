package manager

import (
	"errors"
	"fmt"
	"time"
)

// SlowCallError is why a breaker opened when the call that opened it
// returned no error but took at least Config.SlowCall: the Err of the
// event of its opening (Event.Err), the Cause of the calls declined
// meanwhile (breaker.OpenError.Cause) and Stats.Cause.
type SlowCallError struct {
	// Took is how long the call took; SlowCall is Config.SlowCall.
	Took, SlowCall time.Duration
}

// Error returns, for example, "fusebox: slow call: took 1.2s, at least
// Config.SlowCall (800ms)".
func (e *SlowCallError) Error() string {
	return fmt.Sprintf("fusebox: slow call: took %v, at least Config.SlowCall (%v)", e.Took, e.SlowCall)
}

// ErrStopped is returned by Acquire, Do, Call and Register once the manager
// has stopped, because Stop was called or because its callbacks panicked too
// often.
var ErrStopped = errors.New("fusebox: manager stopped")

// ErrRemoved is matched, with errors.Is, by the error of every call through
// the handle of a breaker that Manager.Remove removed: Acquire, Do, Call,
// ForceOpen, Reset and Reconfigure. That error names the breaker. A breaker registered again under the same name is a new
// breaker with a new handle; the old handle stays removed.
var ErrRemoved = errors.New("fusebox: breaker removed")

// errNotStarted is the cause of Register's error, and the value every
// other method panics with, when the Manager was not made by Start (a zero
// Manager, say): it has no goroutine to serve it. It is the caller's
// mistake, which its message says how to mend; no caller has reason to
// match it.
var errNotStarted = errors.New("fusebox: this manager.Manager was not made by manager.Start: make one with manager.Start(manager.Options{})")

// ErrDuplicate is matched, with errors.Is, by the error Register returns for
// a name that is already registered.
var ErrDuplicate = errors.New("fusebox: a breaker with this name is already registered")

// errNilContext is the cause of the error Acquire, Do and Call return for a
// nil context, and errNilFunc of the one Do and Call return for a nil
// function: the caller's mistake, not the service's failure, which no
// caller has reason to match. Such a call is not made and not counted.
var (
	errNilContext = errors.New("fusebox: nil context")
	errNilFunc    = errors.New("fusebox: nil function")
)

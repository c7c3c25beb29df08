// Package recover decides how a breaker recovers: how long it stays open
// after it trips or after a failed probe, and how long a probe may run before
// it is given up on.
//
// A Recover is asked for a duration at exactly three transitions of a
// breaker: {closed, open} (it tripped), {probing, open} (the probe failed) and
// {half_open, probing} (a probe started). It keeps state of its own between
// those calls: Init returns the first state, and each Timeout returns the
// next, which the manager hands to the following Timeout call of the same
// breaker. A successful probe closes the breaker without asking Recover, so
// the next {closed, open} is always the first after a recovery: that is where
// a policy such as Exponential starts again from its initial period.
//
// Recover methods run on the manager's goroutine, one breaker at a time, so
// a Recover needs no locking of its own, but it must be quick and must not
// call back into the manager. A panic in Init or Timeout is recovered by the
// manager, which logs it and restarts its breakers.
//
// The error of the call that opened the breaker reaches Timeout as
// Context.Err, so a policy can honour a hint the error carries: how long
// the service asked to be left alone (an HTTP Retry-After, a gRPC
// RetryInfo, a rate limit's reset). WithHints wraps any policy so that an
// error implementing Hint keeps the breaker open at least that long.
//
// A file that imports this package cannot call the builtin recover()
// function: the package name shadows it ("use of package recover not in
// selector"). Import it under another name, such as
//
//	import fbrecover "github.com/fusebox-go/fusebox/recover"
//
// in files that also need the builtin.
package recover

import (
	"fmt"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
)

// Context describes the transition a Timeout call is asked about.
type Context struct {
	// Name is the breaker's name.
	Name string
	// Transition is {closed, open}, {probing, open} or {half_open, probing}:
	// the duration asked for is an open period when Transition.To is
	// breaker.Open, and a probe's time otherwise.
	Transition breaker.Transition
	// Outcome is the outcome of the call that opened the breaker
	// (classify.Failure), or zero for {half_open, probing}.
	Outcome classify.Outcome
	// At is when the transition happened, on the manager's clock; the
	// duration Timeout returns counts from there. It is zero when the
	// duration is asked ahead: a shared breaker asks for its next probe's
	// time ({half_open, probing}) as it opens.
	At time.Time
	// Err is the error of the call that opened the breaker, when that call
	// was released in this process with an error (Permit.Release(err), or
	// Do and Call returning one), or a *manager.SlowCallError for a call
	// that returned none but took at least the breaker's Config.SlowCall.
	// It is nil for {half_open, probing}, for a call released with an
	// outcome only or with a nil error, and for an opening decided by
	// another process that shares the breaker. A policy
	// may read a hint the error carries, such as how long the service asked
	// to be left alone (see WithHints and Hint); it must not keep the error
	// beyond the call.
	Err error
}

// opening reports whether the transition opens the breaker, so that the
// duration asked for is an open period rather than a probe's time.
func (c Context) opening() bool { return c.Transition.To == breaker.Open }

// Recover is a recovery policy. See the package documentation for when its
// methods are called.
type Recover interface {
	// Init validates the policy's options and returns its initial state. It
	// is called when a breaker is registered, and again for every breaker
	// when the manager restarts after a panic. An error fails Register; it
	// should be a *breaker.ConfigError naming the field.
	Init() (any, error)
	// Timeout returns how long the state entered by c.Transition lasts (the
	// open period, or the probe's time) and the state to pass to the next
	// call. A negative duration is treated as zero.
	Timeout(c Context, state any) (time.Duration, any)
}

// invalid returns a *breaker.ConfigError for field; problem is formatted
// with args.
func invalid(field, problem string, args ...any) *breaker.ConfigError {
	return &breaker.ConfigError{Field: field, Problem: fmt.Sprintf(problem, args...)}
}

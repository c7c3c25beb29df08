// Package classify names the outcome of a call made through a breaker and
// holds the functions that turn a call's error into an outcome.
//
// A breaker counts only two kinds of outcome: a success, which is evidence
// that the service behind it works, and a failure, which is evidence that it
// does not. Everything else (a caller that gave up, a request the caller
// itself got wrong) is Ignore: the call is released and counted in the stats,
// but it moves no counter of the breaker's strategy.
package classify

import (
	"context"
	"errors"
	"strconv"
)

// Outcome is the verdict on one call. The zero value is not an outcome; it
// means "none" where a field may carry no outcome (an event caused by a
// timer, for instance).
type Outcome uint8

const (
	// Success means the call worked: it resets a consecutive-failure count
	// and closes a probing breaker.
	Success Outcome = iota + 1
	// Failure means the call failed in a way that says the service is
	// unhealthy: it counts toward tripping and re-opens a probing breaker.
	Failure
	// Ignore means the call says nothing about the service: it changes no
	// count, and a probe released with it gives the probe slot back.
	Ignore
)

// String returns "success", "failure", "ignore", or "none" for the zero value.
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Failure:
		return "failure"
	case Ignore:
		return "ignore"
	case 0:
		return "none"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Classifier turns the error a call returned into an Outcome. It runs on the
// caller's goroutine, once per released call, so it must be fast and must not
// block. A Classifier that returns anything but Success, Failure or Ignore is
// treated as if it returned Failure.
type Classifier func(err error) Outcome

// Default is the classifier a breaker uses when none is configured: a nil
// error is a Success, an error for which errors.Is(err, context.Canceled)
// holds is Ignore (the caller gave up; the service may be fine), and every
// other error, context.DeadlineExceeded included, is a Failure.
func Default(err error) Outcome {
	if err == nil {
		return Success
	}
	if errors.Is(err, context.Canceled) {
		return Ignore
	}
	return Failure
}

// IgnoreErrors returns a Classifier that treats the given errors (matched
// with errors.Is) as Ignore and classifies everything else with next, or with
// Default when next is nil. Use it for errors that are the caller's fault,
// such as a validation error, so they never trip the breaker.
func IgnoreErrors(next Classifier, errs ...error) Classifier {
	if next == nil {
		next = Default
	}
	list := append([]error(nil), errs...)
	return func(err error) Outcome {
		if err != nil {
			for _, target := range list {
				if errors.Is(err, target) {
					return Ignore
				}
			}
		}
		return next(err)
	}
}

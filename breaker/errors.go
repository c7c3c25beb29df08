package breaker

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrOpen is matched, with errors.Is, by the error of every call a breaker
// declines. The error itself is an *OpenError, which says which breaker
// declined and until when.
var ErrOpen = errors.New("fusebox: breaker is open")

// OpenError is the error a declined call gets. A breaker builds one per open
// period when its state changes, so declining a call allocates nothing; the
// value is shared by every call declined in that period and must not be
// modified.
type OpenError struct {
	// Name is the breaker's name.
	Name string
	// State is Open, HalfOpen or Probing: the state that declined the call;
	// or Closed for a call declined by a slow start after a recovery
	// (manager's Config.SlowStart), which admits only a share of calls.
	State State
	// Until is when the breaker next lets a probe through: the end of the
	// open period, or the end of the running probe's time. It is zero when
	// that is not known (yet), for example while a breaker is forced open.
	// For a call declined by a slow start (State Closed), it is the end of
	// the slow start, when every call goes through again.
	Until time.Time
	// Cause is the error of the call that opened the breaker (it tripped it,
	// or it was the probe that failed), when that call was released with
	// one in this process; nil otherwise, and for a breaker forced open.
	// For a breaker shared with other processes that one of them opened,
	// it is an *OpenedError: who opened it, and its error's text.
	// It stays the same while the breaker recovers from that opening
	// (half_open, probing). It is not in the error's chain: errors.Is(err,
	// context.DeadlineExceeded) does not hold for a declined call because
	// the call that opened the breaker timed out; ask errors.Is(e.Cause,
	// ...) for that.
	Cause error
}

// Error describes the declined call, for example
// `fusebox: breaker "payments" is open until 2026-01-02T15:04:05Z`.
func (e *OpenError) Error() string {
	var what string
	switch e.State {
	case Probing:
		what = "probing (one trial call in flight)"
	case Closed:
		what = "in its slow start (admitting a growing share of calls)"
	default:
		what = e.State.String()
	}
	msg := fmt.Sprintf("fusebox: breaker %q is %s", e.Name, what)
	if !e.Until.IsZero() {
		msg += " until " + e.Until.Format(time.RFC3339Nano)
	}
	if o, ok := e.Cause.(*OpenedError); ok {
		msg += ", " + o.Error()
	} else if e.Cause != nil {
		msg += ", opened by: " + strings.TrimPrefix(e.Cause.Error(), "fusebox: ")
	}
	return msg
}

// Is reports whether target is ErrOpen, so that errors.Is(err, ErrOpen)
// holds for every declined call.
func (e *OpenError) Is(target error) bool { return target == ErrOpen }

// OpenedError says which process of a fleet opened a breaker they share,
// and why: the text of the error of the call that opened it there, as the
// store carried it (one line, bounded). It is the Cause of a declined
// call's *OpenError, and the Err of the event of the transition, in every
// process that followed the opening rather than made it.
type OpenedError struct {
	// By is the opener's process name (manager.Options.Name).
	By string
	// Text is the text of the error of the call that opened the breaker
	// (the call that tripped it, or the probe that failed); empty if that
	// call returned none.
	Text string
}

// Error returns "opened by web-7: dial tcp 10.0.0.7:443: connect:
// connection refused", or "opened by web-7" without a Text.
func (e *OpenedError) Error() string {
	switch {
	case e.Text == "":
		return "opened by " + e.By
	case e.By == "":
		return "opened: " + e.Text
	}
	return "opened by " + e.By + ": " + e.Text
}

// ConfigError reports an invalid field of a strategy or of a recovery
// policy. Register wraps it with the breaker's name.
type ConfigError struct {
	// Field names the field, qualified by its type, such as
	// "breaker.FailureRate.Rate".
	Field string
	// Problem says what is wrong with it, such as "must be in (0, 1], got 1.5".
	Problem string
}

// Error returns "Field Problem".
func (e *ConfigError) Error() string { return e.Field + " " + e.Problem }

// invalid returns a *ConfigError for field; problem is formatted with args.
func invalid(field, problem string, args ...any) *ConfigError {
	return &ConfigError{Field: field, Problem: fmt.Sprintf(problem, args...)}
}

package recover

import (
	"errors"
	"time"
)

// Hint is implemented by an error that says how long the service that
// returned it asked its clients to wait before calling again: an HTTP
// Retry-After header, a gRPC RetryInfo detail, a rate limit's reset time.
// RetryAfter returns that wait, counted from when the error was returned;
// zero or negative means no wait was asked for. A policy of its own finds
// one in the error that opened the breaker with errors.As(c.Err, &hint).
type Hint interface {
	error
	RetryAfter() time.Duration
}

// hintOf returns the wait asked for by the first error in err's chain that
// implements Hint, and whether there is one that asks for a wait.
func hintOf(err error) (time.Duration, bool) {
	var h Hint
	if err == nil || !errors.As(err, &h) {
		return 0, false
	}
	d := h.RetryAfter()
	return d, d > 0
}

// WithHints returns a Recover that is r, except that an open period lasts
// at least as long as the Hint carried by the error that opened the breaker
// (Context.Err), up to limit: a service that asked to be left alone for a
// minute is not probed after five seconds. Periods that r makes longer, and
// probe times, are r's. The hint counts from the transition (Context.At),
// which is when the call that carried it was released. A nil r means the
// manager's default, BasicTimeout{Open: 30 * time.Second}; a limit that is
// not positive makes Init fail with a *breaker.ConfigError.
//
// WithHints keeps no state of its own beyond r's, so one value may serve
// any number of breakers.
func WithHints(r Recover, limit time.Duration) Recover {
	if r == nil {
		r = BasicTimeout{Open: defaultOpen}
	}
	return hinted{inner: r, max: limit}
}

type hinted struct {
	inner Recover
	max   time.Duration
}

func (h hinted) Init() (any, error) {
	if h.max <= 0 {
		return nil, invalid("recover.WithHints.max", "must be positive, got %v", h.max)
	}
	return h.inner.Init()
}

func (h hinted) Timeout(c Context, state any) (time.Duration, any) {
	d, next := h.inner.Timeout(c, state)
	if !c.opening() {
		return d, next
	}
	if hint, ok := hintOf(c.Err); ok {
		d = max(d, min(hint, h.max))
	}
	return d, next
}

package fleetsim

import (
	"context"
	"time"

	"github.com/benbjohnson/clock"
)

// skewed is a process's clock: the real clock (virtual in a synctest
// bubble) with an offset, as a host whose clock is wrong by that much.
// Durations and timers are the real clock's: only instants move.
type skewed struct {
	clock.Clock
	off time.Duration
}

// newClock returns the clock of a process off from the true time.
func newClock(off time.Duration) clock.Clock { return skewed{Clock: clock.New(), off: off} }

// Now returns the true time plus the offset.
func (c skewed) Now() time.Time { return c.Clock.Now().Add(c.off) }

// Since returns the time elapsed since t, an instant of this clock.
func (c skewed) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Until returns the time left until t, an instant of this clock.
func (c skewed) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// WithDeadline returns a context done at d, an instant of this clock.
func (c skewed) WithDeadline(parent context.Context, d time.Time) (context.Context, context.CancelFunc) {
	return c.Clock.WithDeadline(parent, d.Add(-c.off))
}

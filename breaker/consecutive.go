package breaker

import (
	"sync/atomic"
	"time"

	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/rule"
)

// Consecutive trips a closed breaker on the Failures-th failure in a row: with
// Failures 5, the fifth failure trips it, not the sixth. A success starts the
// count again; an ignored call leaves it as it is.
//
// Failures must be at least 1; the zero value is not valid. A manager.Config
// with a nil Strategy uses Consecutive{Failures: 5}.
type Consecutive struct {
	// Failures is how many failures in a row trip the breaker.
	Failures int
}

// NewCounter implements Strategy.
func (s Consecutive) NewCounter() (Counter, error) {
	if s.Failures < 1 {
		return nil, invalid("breaker.Consecutive.Failures", "must be at least 1, got %d", s.Failures)
	}
	return &consecutiveCounter{s: s}, nil
}

// consecutiveCounter is one atomic word. A success only loads it unless it
// has to clear it, so that a healthy breaker's callers share the cache line
// without writing to it.
type consecutiveCounter struct {
	n atomic.Int64
	s Consecutive
}

func (c *consecutiveCounter) Record(o classify.Outcome, _ time.Time) bool {
	switch o {
	case classify.Success:
		if c.n.Load() != 0 {
			c.n.Store(0)
		}
	case classify.Failure:
		// >= rather than ==: should a stale failure slip in between a
		// generation check and this add, the breaker still trips on
		// the next failure instead of never. The trip itself is one
		// compare-and-swap, so it happens once however many see this.
		return rule.Consecutive(c.n.Add(1), c.s.Failures)
	}
	return false
}

func (c *consecutiveCounter) UsesClock() bool { return false }

// Count returns the current run of failures. It is meant for tests and
// diagnostics.
func (c *consecutiveCounter) Count() int64 { return c.n.Load() }

package recover

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
)

// Exponential lengthens the open period each time a probe fails: Initial
// after a trip, then Initial*Multiplier, Initial*Multiplier², ... up to Max,
// and back to Initial at the first trip after a recovery. With Jitter, each
// open period is scaled by a random factor in [1-Jitter, 1], so that many
// breakers opened together do not all probe at the same instant.
//
// Initial must be positive; the other fields have documented zero values.
type Exponential struct {
	// Initial is the first open period after a trip. It must be positive.
	Initial time.Duration
	// Max caps the open period. Zero means no cap. It must not be below
	// Initial otherwise.
	Max time.Duration
	// Multiplier scales the open period after each failed probe. Zero means
	// 2; otherwise it must be at least 1.
	Multiplier float64
	// Jitter, between 0 and 1, scales each open period by a random factor in
	// [1-Jitter, 1]. Zero means none.
	Jitter float64
	// ProbeTimeout is how long a probe may run. Zero means Initial.
	ProbeTimeout time.Duration
	// Rand is the source of the jitter. Nil means a source seeded at random
	// for each breaker. A Rand given here is used from the manager's
	// goroutine only; do not share it between managers.
	Rand *rand.Rand
}

type expState struct {
	period time.Duration // the last open period, before jitter
	rng    *rand.Rand
}

// Init implements Recover.
func (e Exponential) Init() (any, error) {
	switch {
	case e.Initial <= 0:
		return nil, invalid("recover.Exponential.Initial", "must be positive, got %v", e.Initial)
	case e.Max < 0:
		return nil, invalid("recover.Exponential.Max", "must not be negative, got %v", e.Max)
	case e.Max != 0 && e.Max < e.Initial:
		return nil, invalid("recover.Exponential.Max", "must not be below Initial (%v), got %v", e.Initial, e.Max)
	case math.IsNaN(e.Multiplier) || (e.Multiplier != 0 && e.Multiplier < 1):
		return nil, invalid("recover.Exponential.Multiplier", "must be at least 1 (or zero for 2), got %v", e.Multiplier)
	case math.IsNaN(e.Jitter) || e.Jitter < 0 || e.Jitter > 1:
		return nil, invalid("recover.Exponential.Jitter", "must be between 0 and 1, got %v", e.Jitter)
	case e.ProbeTimeout < 0:
		return nil, invalid("recover.Exponential.ProbeTimeout", "must not be negative, got %v", e.ProbeTimeout)
	}
	st := expState{rng: e.Rand}
	if st.rng == nil && e.Jitter > 0 {
		st.rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return st, nil
}

// Timeout implements Recover.
func (e Exponential) Timeout(c Context, state any) (time.Duration, any) {
	st, _ := state.(expState)
	if !c.opening() {
		if e.ProbeTimeout > 0 {
			return e.ProbeTimeout, st
		}
		return e.Initial, st
	}
	if c.Transition.From == breaker.Closed || st.period <= 0 {
		st.period = e.Initial
	} else {
		st.period = e.next(st.period)
	}
	d := st.period
	if e.Jitter > 0 && st.rng != nil {
		d = time.Duration(float64(d) * (1 - e.Jitter*st.rng.Float64()))
	}
	return d, st
}

func (e Exponential) next(p time.Duration) time.Duration {
	m := e.Multiplier
	if m == 0 {
		m = 2
	}
	limit := time.Duration(math.MaxInt64)
	if e.Max > 0 {
		limit = e.Max
	}
	next := float64(p) * m
	if next >= float64(limit) {
		return limit
	}
	return time.Duration(next)
}

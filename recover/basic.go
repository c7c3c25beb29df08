package recover

import "time"

// BasicTimeout keeps a breaker open for the same period every time and gives
// each probe the same time. Its zero value is valid: a breaker stays open
// 30 seconds, and a probe may run as long.
type BasicTimeout struct {
	// Open is the open period. Zero means 30 seconds.
	Open time.Duration
	// ProbeTimeout is how long a probe may run before another caller may
	// probe. Zero means Open.
	ProbeTimeout time.Duration
}

// defaultOpen is the open period of a zero BasicTimeout.
const defaultOpen = 30 * time.Second

// Init implements Recover. Its state is the pair of resolved durations.
func (b BasicTimeout) Init() (any, error) {
	if b.Open < 0 {
		return nil, invalid("recover.BasicTimeout.Open", "must not be negative, got %v", b.Open)
	}
	if b.ProbeTimeout < 0 {
		return nil, invalid("recover.BasicTimeout.ProbeTimeout", "must not be negative, got %v", b.ProbeTimeout)
	}
	if b.Open == 0 {
		b.Open = defaultOpen
	}
	if b.ProbeTimeout == 0 {
		b.ProbeTimeout = b.Open
	}
	return b, nil
}

// Timeout implements Recover.
func (b BasicTimeout) Timeout(c Context, state any) (time.Duration, any) {
	// The state is the resolved policy; handing it back unchanged
	// allocates nothing.
	if s, ok := state.(BasicTimeout); ok {
		b = s
	}
	if c.opening() {
		return b.Open, state
	}
	return b.ProbeTimeout, state
}

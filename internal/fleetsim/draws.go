package fleetsim

import (
	"math/rand/v2"
	"time"
)

// draws is the simulator's randomness: each draw is a function of the seed
// and of keys naming what is drawn (a process, an operation and how many
// of them it made before), so that a draw does not depend on the order in
// which goroutines woken at one virtual instant happen to run.
type draws struct{ seed uint64 }

// Keys of the things drawn for.
const (
	keyCall uint64 = iota + 1
	keyChange
	keyCaller
	keyService
)

// rand returns a source for the draw named by keys.
func (d draws) rand(keys ...uint64) *rand.Rand {
	h := d.seed ^ 0x9e3779b97f4a7c15
	for _, k := range keys {
		h = mix(h ^ mix(k+0x632be59bd9b4e019))
	}
	return rand.New(rand.NewPCG(h, mix(h)))
}

// mix is splitmix64's finaliser.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// between returns a duration in [lo, hi), to the nanosecond: two draws
// almost never give one instant, so the events they time happen in an
// order the seed decides.
func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Int64N(int64(hi-lo)))
}

package dashboard

import (
	"testing"
	"time"
)

// rates works from the oldest sample at most a minute old, from fixed
// instants.
func TestRates(t *testing.T) {
	t0 := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration, calls, ok, failures uint64) sample {
		return sample{at: t0.Add(d), calls: calls, ok: ok, failures: failures}
	}
	for _, c := range []struct {
		name            string
		samples         []sample
		cur             sample
		perSecond, rate float64
	}{
		{"no sample", nil, at(0, 10, 5, 5), 0, 0},
		{"only the current instant", []sample{at(0, 10, 5, 5)}, at(0, 10, 5, 5), 0, 0},
		{"ten seconds", []sample{at(0, 0, 0, 0), at(5*time.Second, 10, 10, 0)}, at(10*time.Second, 100, 75, 25), 10, 0.25},
		{"older than a minute is left out", []sample{at(0, 0, 0, 0), at(30*time.Second, 600, 600, 0)}, at(90*time.Second, 1200, 900, 300), 10, 0.5},
		{"no calls with an outcome", []sample{at(0, 0, 0, 0)}, at(10*time.Second, 50, 0, 0), 5, 0},
	} {
		perSecond, rate := rates(c.samples, c.cur)
		if perSecond != c.perSecond || rate != c.rate {
			t.Errorf("%s: rates(%v, %v) = %v, %v; want %v, %v", c.name, c.samples, c.cur, perSecond, rate, c.perSecond, c.rate)
		}
	}
}

package breaker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
)

// windowed is the method of a Counter that keeps a window (see Counter).
type windowed interface {
	Window(now time.Time) (calls, failures uint64)
}

// Window shows what a windowed strategy trips on: the calls and failures
// that are still in its window, read at an instant.
func TestWindow(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		name           string
		strategy       breaker.Strategy
		seq            []rec
		at             time.Duration
		calls, failure uint64
	}{
		{"failure rate, empty", breaker.FailureRate{Rate: 0.9, Window: 4, MinCalls: 4}, nil, 0, 0, 0},
		{"failure rate, ignored calls are not in it", breaker.FailureRate{Rate: 0.9, Window: 4, MinCalls: 4},
			[]rec{{0, S, false}, {0, I, false}, {0, F, false}}, 0, 2, 1},
		{"failure rate, the oldest calls leave", breaker.FailureRate{Rate: 0.9, Window: 4, MinCalls: 4},
			[]rec{{0, F, false}, {0, F, false}, {0, S, false}, {0, S, false}, {0, S, false}, {0, S, false}}, 0, 4, 0},
		{"time window, empty", breaker.TimeWindow{Rate: 0.9, Period: 10 * s, Buckets: 10, MinCalls: 10}, nil, 5 * s, 0, 0},
		{"time window, within the period", breaker.TimeWindow{Rate: 0.9, Period: 10 * s, Buckets: 10, MinCalls: 10},
			[]rec{{0, F, false}, {2 * s, S, false}, {9 * s, F, false}}, 9 * s, 3, 2},
		{"time window, the first bucket left", breaker.TimeWindow{Rate: 0.9, Period: 10 * s, Buckets: 10, MinCalls: 10},
			[]rec{{0, F, false}, {2 * s, S, false}, {9 * s, F, false}}, 10 * s, 2, 1},
		{"time window, all old", breaker.TimeWindow{Rate: 0.9, Period: 10 * s, Buckets: 10, MinCalls: 10},
			[]rec{{0, F, false}, {2 * s, S, false}}, 60 * s, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctr := newCounter(t, c.strategy)
			play(t, ctr, c.seq)
			w, ok := ctr.(windowed)
			require.True(t, ok, "%T has Window", ctr)
			calls, failures := w.Window(t0.Add(c.at))
			assert.Equal(t, [2]uint64{c.calls, c.failure}, [2]uint64{calls, failures}, "Window(t0+%v) after %v", c.at, c.seq)
		})
	}
	_, ok := newCounter(t, breaker.Consecutive{Failures: 3}).(windowed)
	assert.False(t, ok, "Consecutive keeps no window")
}

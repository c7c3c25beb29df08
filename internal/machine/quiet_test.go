package machine_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/machine"
)

// opaque is a strategy whose counter says nothing of what it holds.
type opaque struct{}

func (opaque) NewCounter() (breaker.Counter, error) { return opaqueCounter{}, nil }

type opaqueCounter struct{}

func (opaqueCounter) Record(classify.Outcome, time.Time) bool { return false }
func (opaqueCounter) UsesClock() bool                         { return false }

func TestQuiet(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strategy breaker.Strategy
		outcomes []classify.Outcome
		force    bool
		want     bool
	}{
		{"consecutive, nothing", breaker.Consecutive{Failures: 3}, nil, false, true},
		{"consecutive, successes", breaker.Consecutive{Failures: 3}, []classify.Outcome{classify.Success, classify.Success}, false, true},
		{"consecutive, a failure", breaker.Consecutive{Failures: 3}, []classify.Outcome{classify.Failure}, false, false},
		{"consecutive, a failure then a success", breaker.Consecutive{Failures: 3}, []classify.Outcome{classify.Failure, classify.Success}, false, true},
		{"rate, successes", breaker.FailureRate{Rate: 0.5, Window: 10}, []classify.Outcome{classify.Success}, false, true},
		{"rate, a failure in the window", breaker.FailureRate{Rate: 0.5, Window: 10}, []classify.Outcome{classify.Failure, classify.Success}, false, false},
		{"time window, a failure", breaker.TimeWindow{Rate: 0.5, Period: time.Minute, Buckets: 6, MinCalls: 10}, []classify.Outcome{classify.Failure}, false, false},
		{"forced open", breaker.Consecutive{Failures: 3}, nil, true, false},
		{"a counter that says nothing", opaque{}, nil, false, false},
	} {
		m, err := machine.NewMachine("b", tc.strategy, t0)
		require.NoError(t, err, tc.name)
		for _, o := range tc.outcomes {
			tk, _, _ := m.Acquire(t0)
			m.Record(tk, o, t0)
		}
		if tc.force {
			_, ok := m.ForceOpen(t0)
			require.True(t, ok, tc.name)
		}
		assert.Equal(t, tc.want, m.Quiet(t0), tc.name)
	}
}

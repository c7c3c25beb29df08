package sharepolicy_test

import (
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/sharepolicy"
	"github.com/fusebox-go/fusebox/store"
	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// custom is a strategy of a user's that a store can evaluate.
type custom struct{ breaker.Consecutive }

func (custom) SharedPolicy() (store.Policy, error) { return store.Policy{Failures: 7}, nil }

// customWindow is one whose window policy leaves Buckets zero.
type customWindow struct{ breaker.Consecutive }

func (customWindow) SharedPolicy() (store.Policy, error) {
	return store.Policy{Rate: 0.5, Period: 10 * time.Second, MinCalls: 4}, nil
}

func TestOf(t *testing.T) {
	for _, c := range []struct {
		name     string
		strategy breaker.Strategy
		want     store.Policy
		err      string // a part of the error; empty: none
	}{
		{"consecutive", breaker.Consecutive{Failures: 3}, store.Policy{Failures: 3}, ""},
		{"time window", breaker.TimeWindow{Rate: 0.5, Period: 10 * time.Second, Buckets: 10, MinCalls: 4},
			store.Policy{Rate: 0.5, Period: 10 * time.Second, Buckets: 10, MinCalls: 4}, ""},
		{"time window, buckets below a millisecond", breaker.TimeWindow{Rate: 0.5, Period: time.Second, Buckets: 3, MinCalls: 1},
			store.Policy{}, "whole milliseconds"},
		{"failure rate", breaker.FailureRate{Rate: 0.5, Window: 10, MinCalls: 5}, store.Policy{}, "cannot be shared"},
		{"invalid consecutive", breaker.Consecutive{Failures: 0}, store.Policy{}, "Failures"},
		{"shareable", custom{breaker.Consecutive{Failures: 1}}, store.Policy{Failures: 7}, ""},
		{"shareable window, zero buckets", customWindow{breaker.Consecutive{Failures: 1}},
			store.Policy{Rate: 0.5, Period: 10 * time.Second, Buckets: 10, MinCalls: 4}, ""},
	} {
		got, err := sharepolicy.Of(c.strategy)
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, c.name)
			continue
		}
		if assert.NoError(t, err, c.name) {
			assert.Equal(t, c.want, got, c.name)
		}
	}
}

func TestBucket(t *testing.T) {
	p := &store.Policy{Rate: 0.5, Period: 10 * time.Second, Buckets: 10, MinCalls: 4}
	for _, c := range []struct {
		at   time.Time
		want int64
	}{
		{time.Unix(0, 0), 0},
		{time.Unix(0, 999_999_999), 0},
		{time.Unix(1, 0), 1},
		{time.Unix(-1, 0), -1},
		{time.Unix(1_700_000_000, 500_000_000), 1_700_000_000},
	} {
		assert.Equal(t, c.want, sharepolicy.Bucket(p, c.at), "Bucket at %v, buckets of 1s", c.at)
	}
}

// Reached is Trips without the quorum: the threshold alone. Trips judges
// the counts without the largest shares.
func TestReached(t *testing.T) {
	run := store.Policy{Failures: 3, Quorum: 2}
	window := store.Policy{Rate: 0.5, Period: 10 * time.Second, Buckets: 10, MinCalls: 4, Quorum: 2}
	for _, c := range []struct {
		name           string
		p              store.Policy
		v              store.Verdict
		reached, trips bool
	}{
		{"run short of the threshold", run, store.Verdict{Failures: 2, LargestFailures: 1}, false, false},
		{"run at the threshold, one process", run, store.Verdict{Failures: 3, LargestFailures: 3}, true, false},
		{"run at the threshold with the largest share, short without", run, store.Verdict{Failures: 4, LargestFailures: 3}, true, false},
		{"run at the threshold without the largest share", run, store.Verdict{Failures: 6, LargestFailures: 3}, true, true},
		{"window short of MinCalls", window, store.Verdict{Calls: 3, Failures: 3}, false, false},
		{"window at the rate, one process", window, store.Verdict{Calls: 4, Failures: 2, LargestCalls: 4, LargestFailures: 2}, true, false},
		{"window at the rate without the largest share", window, store.Verdict{Calls: 8, Failures: 4, LargestCalls: 4, LargestFailures: 2}, true, true},
		{"window: the largest share takes the rate below", window, store.Verdict{Calls: 20, Failures: 10, LargestCalls: 5, LargestFailures: 5}, true, false},
	} {
		assert.Equal(t, c.reached, sharepolicy.Reached(c.p, c.v), "Reached: %s, %+v", c.name, c.v)
		assert.Equal(t, c.trips, c.p.Trips(c.v), "Trips: %s, %+v", c.name, c.v)
	}
}

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

// Package sharepolicy turns a breaker's strategy into the policy a store
// evaluates for it, and holds what the manager, alone, computes from a
// policy.
package sharepolicy

import (
	"fmt"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/rule"
	"github.com/fusebox-go/fusebox/store"
)

// Of returns the shared policy of a strategy: breaker.Consecutive and
// breaker.TimeWindow can be shared, and any strategy implementing
// Shareable (a window policy of which with zero Buckets gets
// rule.DefaultBuckets, as a TimeWindow does). breaker.FailureRate cannot:
// its window of the last N calls would need every call, healthy ones
// included, to reach the store.
func Of(s breaker.Strategy) (store.Policy, error) {
	if _, err := s.NewCounter(); err != nil {
		return store.Policy{}, err
	}
	switch s := s.(type) {
	case breaker.Consecutive:
		return store.Policy{Failures: s.Failures}, nil
	case breaker.TimeWindow:
		if w := rule.Width(s.Period, s.Buckets); w%time.Millisecond != 0 {
			return store.Policy{}, &breaker.ConfigError{Field: "breaker.TimeWindow.Buckets", Problem: fmt.Sprintf("makes buckets of %v (Period %v / %d); a shared breaker needs buckets of whole milliseconds, the unit the stores count time in", w, s.Period, rule.Buckets(s.Buckets))}
		}
		return store.Policy{Rate: s.Rate, Period: s.Period, Buckets: rule.Buckets(s.Buckets), MinCalls: s.MinCalls}, nil
	case store.Shareable:
		p, err := s.SharedPolicy()
		if p.Rate > 0 {
			p.Buckets = rule.Buckets(p.Buckets)
		}
		return p, err
	case breaker.FailureRate:
		return store.Policy{}, fmt.Errorf("%w: breaker.FailureRate counts the last %d calls, which would take a store round trip for every call; use breaker.TimeWindow or breaker.Consecutive", store.ErrNotShareable, s.Window)
	}
	return store.Policy{}, fmt.Errorf("%w: %T implements neither a built-in policy nor store.Shareable", store.ErrNotShareable, s)
}

// Bucket returns the index of the bucket of window policy p that holds
// instant t: the numbering the stores use (rule.Bucket), by which the
// manager counts the successes it has not reported yet.
func Bucket(p *store.Policy, t time.Time) int64 {
	return rule.Bucket(t, rule.Width(p.Period, p.Buckets))
}

// Reached reports whether a verdict's counts reach p's threshold,
// whatever the processes they come from: store.Policy.Trips without the
// quorum.
func Reached(p store.Policy, v store.Verdict) bool {
	return rule.Reached(p.Rate, int64(p.MinCalls), p.Failures, v.Calls, v.Failures)
}

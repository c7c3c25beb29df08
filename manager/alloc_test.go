package manager_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
)

// The hot path allocates nothing: a call through a closed breaker, a
// declined call, and Do or Call around a function that returns nil.
func TestHotPathAllocatesNothing(t *testing.T) {
	m, mock := startMock(t)
	ctx := context.Background()
	closed := register(t, m, "closed", manager.Config{})
	slow := register(t, m, "slow", manager.Config{SlowCall: time.Second})
	rate := register(t, m, "rate", manager.Config{Strategy: breaker.FailureRate{Rate: 0.5, Window: 100}})
	window := register(t, m, "window", manager.Config{Strategy: breaker.TimeWindow{Rate: 0.5, Period: 10 * time.Second, MinCalls: 1000}})
	probing := register(t, m, "probing", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	fail(t, probing, 1)
	advance(m, mock, 30*time.Second)
	probe(t, probing)
	open := register(t, m, "open", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	fail(t, open, 1)
	m.Sync()

	nilFn := func(context.Context) error { return nil }
	intFn := func(context.Context) (int, error) { return 1, nil }
	acquireRelease := func(b *manager.Breaker, err error) func() {
		return func() {
			p, _ := b.Acquire(ctx)
			p.Release(err)
		}
	}
	cases := []struct {
		name string
		f    func()
	}{
		{"Acquire+Release closed", acquireRelease(closed, nil)},
		{"Acquire+Release failure closed", acquireRelease(closed, context.Canceled)},
		{"Acquire+Release SlowCall", acquireRelease(slow, nil)},
		{"Acquire+Release FailureRate", acquireRelease(rate, nil)},
		{"Acquire+Release TimeWindow", acquireRelease(window, nil)},
		{"Acquire declined open", func() { _, _ = open.Acquire(ctx) }},
		{"Acquire declined probing", func() { _, _ = probing.Acquire(ctx) }},
		{"Do nil", func() { _ = closed.Do(ctx, nilFn) }},
		{"Do declined", func() { _ = open.Do(ctx, nilFn) }},
		{"Call nil", func() { _, _ = manager.Call(ctx, closed, intFn) }},
		{"Stats", func() { _ = closed.Stats() }},
	}
	for _, c := range cases {
		assert.Zero(t, testing.AllocsPerRun(1000, c.f), "allocations per %s", c.name)
	}
	requireState(t, closed, breaker.Closed, "after the runs")
	requireState(t, open, breaker.Open, "after the runs")
	require.Equal(t, breaker.Probing, probing.State())
}

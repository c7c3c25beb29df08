package guides_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The code of docs/recover.md, and tests of what the guide says about when
// a Recover is called and with what.

var (
	tripped     = recover.Context{Transition: breaker.Transition{From: breaker.Closed, To: breaker.Open}, Outcome: classify.Failure}
	probeStarts = recover.Context{Transition: breaker.Transition{From: breaker.HalfOpen, To: breaker.Probing}}
	probeFailed = recover.Context{Transition: breaker.Transition{From: breaker.Probing, To: breaker.Open}, Outcome: classify.Failure}
)

// builtins holds the built-in policies of the guide, each with the
// durations its comment promises for: a trip, a probe, a failed probe, a
// probe, a failed probe, a probe, a failed probe.
func builtins() []struct {
	policy recover.Recover
	want   []time.Duration
} {
	policies := []recover.Recover{
		recover.BasicTimeout{},                      // open 30s; a probe may run 30s
		recover.BasicTimeout{Open: 5 * time.Second}, // open 5s; a probe may run 5s
		recover.Exponential{Initial: time.Second},   // open 1s, 2s, 4s, ... without a cap; a probe may run 1s
		recover.Exponential{
			Initial:      time.Second,
			Max:          3 * time.Second,
			Multiplier:   1.5,
			ProbeTimeout: 10 * time.Second,
		}, // open 1s, 1.5s, 2.25s, 3s, 3s, ...; a probe may run 10s
	}
	s := time.Second
	return []struct {
		policy recover.Recover
		want   []time.Duration
	}{
		{policies[0], []time.Duration{30 * s, 30 * s, 30 * s, 30 * s, 30 * s, 30 * s, 30 * s}},
		{policies[1], []time.Duration{5 * s, 5 * s, 5 * s, 5 * s, 5 * s, 5 * s, 5 * s}},
		{policies[2], []time.Duration{s, s, 2 * s, s, 4 * s, s, 8 * s}},
		{policies[3], []time.Duration{s, 10 * s, 1500 * time.Millisecond, 10 * s, 2250 * time.Millisecond, 10 * s, 3 * s}},
	}
}

func TestBuiltins(t *testing.T) {
	seq := []recover.Context{tripped, probeStarts, probeFailed, probeStarts, probeFailed, probeStarts, probeFailed}
	for _, tc := range builtins() {
		state, err := tc.policy.Init()
		require.NoError(t, err, "%#v", tc.policy)
		for i, c := range seq {
			var got time.Duration
			got, state = tc.policy.Timeout(c, state)
			assert.Equal(t, tc.want[i], got, "%#v: step %d, %v", tc.policy, i, c.Transition)
		}
		// The first trip after a recovery starts over.
		got, _ := tc.policy.Timeout(tripped, state)
		assert.Equal(t, tc.want[0], got, "%#v: a trip after a recovery", tc.policy)
	}
}

func TestJitter(t *testing.T) {
	policy := recover.Exponential{
		Initial: time.Second,
		Max:     time.Minute,
		Jitter:  0.2,                         // each open period is 80% to 100% of 1s, 2s, 4s, ...
		Rand:    rand.New(rand.NewPCG(1, 2)), // a fixed seed, for a test
	}
	state, err := policy.Init()
	require.NoError(t, err)
	got, state := policy.Timeout(tripped, state)
	assert.InDelta(t, 0.9*float64(time.Second), float64(got), 0.1*float64(time.Second))
	got, _ = policy.Timeout(probeFailed, state)
	assert.InDelta(t, 1.8*float64(time.Second), float64(got), 0.2*float64(time.Second))
}

// chosen returns how long the timer started by the breaker's last
// transition runs: what the policy chose.
func chosen(b *manager.Breaker) time.Duration {
	s := b.Snapshot()
	return s.Until.Sub(s.Since)
}

// TestDoubling runs the doubling policy of the guide through a breaker: the
// open periods are 1s, 2s, 4s, each probe may run 1s, and a recovery does
// not start the doubling over.
func TestDoubling(t *testing.T) {
	doubling := recover.Func(
		func() (time.Duration, error) { return time.Second, nil },
		func(c recover.Context, open time.Duration) (time.Duration, time.Duration) {
			if c.Transition.To != breaker.Open {
				return time.Second, open // a probe may run 1s; the open period stays
			}
			return open, 2 * open
		},
	)
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()
	b, err := m.Register("search", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: doubling})
	require.NoError(t, err)
	ctx := context.Background()
	fail := func(context.Context) error { return errors.New("down") }

	_ = b.Do(ctx, fail) // trips
	m.Sync()
	assert.Equal(t, time.Second, chosen(b), "{closed, open}")
	mock.Add(time.Second)
	m.Sync()
	p, err := b.Acquire(ctx) // the probe
	require.NoError(t, err)
	m.Sync()
	assert.Equal(t, time.Second, chosen(b), "{half_open, probing}")
	p.Release(errors.New("down"))
	m.Sync()
	assert.Equal(t, 2*time.Second, chosen(b), "{probing, open}")
	mock.Add(2 * time.Second)
	m.Sync()
	p, err = b.Acquire(ctx)
	require.NoError(t, err)
	m.Sync()
	assert.Equal(t, time.Second, chosen(b), "{half_open, probing}")
	p.Release(nil)
	require.Equal(t, breaker.Closed, b.State())
	_ = b.Do(ctx, fail)
	m.Sync()
	assert.Equal(t, 4*time.Second, chosen(b), "{closed, open} after a recovery: the state goes on")
}

// TestRestartCallsInit checks that a restart after a panic calls Init again,
// so that the doubling starts over.
func TestRestartCallsInit(t *testing.T) {
	inits := 0
	policy := recover.Func(
		func() (time.Duration, error) { inits++; return time.Second, nil },
		func(_ recover.Context, d time.Duration) (time.Duration, time.Duration) {
			if d > 2*time.Second {
				panic("the open period is too long")
			}
			return d, 2 * d
		},
	)
	var logged bytes.Buffer
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	defer m.Stop()
	b, err := m.Register("search", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: policy})
	require.NoError(t, err)
	ctx := context.Background()
	fail := func(context.Context) error { return errors.New("down") }

	_ = b.Do(ctx, fail) // 1s
	mock.Add(time.Second)
	m.Sync()
	_ = b.Do(ctx, fail) // the probe: 2s, then it fails: 4s panics
	m.Sync()
	assert.Equal(t, breaker.Closed, b.State(), "the restart closes every breaker")
	assert.Equal(t, 2, inits, "Init is called again on a restart")
	assert.Contains(t, logged.String(), "the open period is too long")

	_ = b.Do(ctx, fail)
	m.Sync()
	assert.Equal(t, time.Second, chosen(b), "the state starts over from Init")
}

func TestInitPanicFailsRegister(t *testing.T) {
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()
	_, err := m.Register("search", manager.Config{Recover: recover.Func(
		func() (int, error) { panic("no") },
		func(_ recover.Context, n int) (time.Duration, int) { return time.Second, n },
	)})
	assert.ErrorContains(t, err, `fusebox: register breaker "search": Config.Recover:`)
	assert.ErrorContains(t, err, "panicked: no")
}

// rcSlowStart is the guide's Recover with a slow start after each recovery.
func rcSlowStart() manager.Config {
	cfg := manager.Config{
		Recover:   recover.Exponential{Initial: time.Second, Max: time.Minute},
		SlowStart: 30 * time.Second, // back to full traffic over 30s after each recovery
	}
	return cfg
}

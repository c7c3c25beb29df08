package main

import (
	"os"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestLinear calls the policy the way the manager does, one transition after
// another, passing each returned state to the next call.
func TestLinear(t *testing.T) {
	var (
		trip      = recover.Context{Transition: breaker.Transition{From: breaker.Closed, To: breaker.Open}, Outcome: classify.Failure}
		probe     = recover.Context{Transition: breaker.Transition{From: breaker.HalfOpen, To: breaker.Probing}}
		probeFail = recover.Context{Transition: breaker.Transition{From: breaker.Probing, To: breaker.Open}, Outcome: classify.Failure}
	)
	policy := Linear{Base: time.Second, Step: 2 * time.Second, Max: 6 * time.Second}
	state, err := policy.Init()
	require.NoError(t, err)

	steps := []struct {
		c    recover.Context
		want time.Duration
	}{
		{trip, time.Second},
		{probe, 500 * time.Millisecond},
		{probeFail, 3 * time.Second},
		{probe, 1500 * time.Millisecond},
		{probeFail, 5 * time.Second},
		{probeFail, 6 * time.Second}, // 7s, capped at Max
		{probe, 3 * time.Second},
		{trip, time.Second}, // after a recovery, from Base again
		{probe, 500 * time.Millisecond},
	}
	for i, step := range steps {
		var got time.Duration
		got, state = policy.Timeout(step.c, state)
		assert.Equal(t, step.want, got, "step %d: %v", i, step.c.Transition)
	}
}

func TestLinearInvalid(t *testing.T) {
	for _, tc := range []struct {
		policy Linear
		field  string
	}{
		{Linear{Max: time.Second}, "Linear.Base"},
		{Linear{Base: time.Second, Step: -1, Max: time.Second}, "Linear.Step"},
		{Linear{Base: time.Second}, "Linear.Max"},
	} {
		_, err := tc.policy.Init()
		var cerr *breaker.ConfigError
		if assert.ErrorAs(t, err, &cerr, "%+v", tc.policy) {
			assert.Equal(t, tc.field, cerr.Field, "%+v", tc.policy)
		}
	}
}

// Example_run is the program's output, which the mock clock makes the same on
// every run.
func Example_run() {
	if err := run(os.Stdout); err != nil {
		panic(err)
	}
	// Output:
	// Linear{Base: 1s, Step: 2s, Max: 6s}, tripping after 2 failures in a row
	//   -- two calls fail
	//     0s  closed -> open        trip    open for 1s
	//   -- the open period ends; the next call is the probe, and fails
	//     1s  open -> half_open     timer
	//     1s  half_open -> probing  probe   the probe may run 500ms
	//     1s  probing -> open       probe   open for 3s
	//   -- the open period ends; the next call is the probe, and fails
	//     4s  open -> half_open     timer
	//     4s  half_open -> probing  probe   the probe may run 1.5s
	//     4s  probing -> open       probe   open for 5s
	//   -- the open period ends; the next call is the probe, and fails
	//     9s  open -> half_open     timer
	//     9s  half_open -> probing  probe   the probe may run 2.5s
	//     9s  probing -> open       probe   open for 6s
	//   -- the open period ends; the probe hangs past its time
	//    15s  open -> half_open     timer
	//    15s  half_open -> probing  probe   the probe may run 3s
	//    18s  probing -> half_open  timer
	//   -- the late probe returns: it is stale and changes nothing
	//   -- the next call is the probe, and succeeds
	//    18s  half_open -> probing  probe   the probe may run 3s
	//    18s  probing -> closed     probe
	//   -- two calls fail again: the policy starts over from Base
	//    18s  closed -> open        trip    open for 1s
	// stats: 9 calls, 1 succeeded, 8 failed (1 of them stale), state open
	//
	// recover.Func: Init returns 1s; Timeout returns (open, 2*open) as the breaker opens, (1s, open) for a probe
	//   -- a call fails
	//     0s  closed -> open        trip    open for 1s
	//   -- the probe fails
	//     1s  open -> half_open     timer
	//     1s  half_open -> probing  probe   the probe may run 1s
	//     1s  probing -> open       probe   open for 2s
	//   -- the probe succeeds
	//     3s  open -> half_open     timer
	//     3s  half_open -> probing  probe   the probe may run 1s
	//     3s  probing -> closed     probe
	//   -- a call fails: the state was not reset by the recovery
	//     3s  closed -> open        trip    open for 4s
	//
	// invalid options: fusebox: register breaker "billing": Config.Recover: Linear.Max must be at least Base (1s), got 1ms
}

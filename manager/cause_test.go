package manager_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// seen is what a recording policy was told at one Timeout call.
type seen struct {
	transition breaker.Transition
	err        error
}

// recording is a policy that keeps open periods and probes at a second and
// records what each Timeout call was told.
func recording(log *[]seen) recover.Recover {
	return recover.Func(nil, func(c recover.Context, _ struct{}) (time.Duration, struct{}) {
		*log = append(*log, seen{c.Transition, c.Err})
		return time.Second, struct{}{}
	})
}

var (
	tripped     = breaker.Transition{From: breaker.Closed, To: breaker.Open}
	probing     = breaker.Transition{From: breaker.HalfOpen, To: breaker.Probing}
	probeFailed = breaker.Transition{From: breaker.Probing, To: breaker.Open}
)

func TestContextErrIsTheErrorOfTheCallThatOpened(t *testing.T) {
	errFirst, errTrip, errProbe := errors.New("first"), errors.New("trip"), errors.New("probe")
	cases := []struct {
		name string
		run  func(t *testing.T, m *manager.Manager, b *manager.Breaker, advance func(time.Duration))
		want []seen
	}{
		{"Release(err) trips, a probe released with an error fails", func(t *testing.T, m *manager.Manager, b *manager.Breaker, advance func(time.Duration)) {
			release(t, b, errFirst)
			release(t, b, errTrip)
			advance(time.Second)
			probe(t, b).Release(errProbe)
		}, []seen{{tripped, errTrip}, {probing, nil}, {probeFailed, errProbe}}},
		{"Do and Call", func(t *testing.T, m *manager.Manager, b *manager.Breaker, advance func(time.Duration)) {
			ctx := context.Background()
			b.Do(ctx, func(context.Context) error { return errFirst })
			b.Do(ctx, func(context.Context) error { return errTrip })
			advance(time.Second)
			manager.Call(ctx, b, func(context.Context) (int, error) { return 0, errProbe })
		}, []seen{{tripped, errTrip}, {probing, nil}, {probeFailed, errProbe}}},
		{"ReleaseOutcome has no error", func(t *testing.T, m *manager.Manager, b *manager.Breaker, advance func(time.Duration)) {
			release(t, b, errFirst)
			p, err := b.Acquire(context.Background())
			require.NoError(t, err)
			p.ReleaseOutcome(classify.Failure)
			advance(time.Second)
			probe(t, b).ReleaseOutcome(classify.Failure)
		}, []seen{{tripped, nil}, {probing, nil}, {probeFailed, nil}}},
		{"ReleaseWith", func(t *testing.T, m *manager.Manager, b *manager.Breaker, advance func(time.Duration)) {
			release(t, b, errFirst)
			p, err := b.Acquire(context.Background())
			require.NoError(t, err)
			p.ReleaseWith(classify.Failure, errTrip)
			advance(time.Second)
			probe(t, b).ReleaseWith(classify.Failure, errProbe)
		}, []seen{{tripped, errTrip}, {probing, nil}, {probeFailed, errProbe}}},
		{"a nil error counted as a failure by the classifier", func(t *testing.T, m *manager.Manager, b *manager.Breaker, advance func(time.Duration)) {
			release(t, b, errFirst)
			release(t, b, nil)
		}, []seen{{tripped, nil}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, mock := startMock(t)
			var log []seen
			classifier := func(err error) classify.Outcome { return classify.Failure }
			b := register(t, m, "b", manager.Config{
				Strategy: breaker.Consecutive{Failures: 2},
				Recover:  recording(&log),
				Classify: classifier,
			})
			c.run(t, m, b, func(d time.Duration) { advance(m, mock, d) })
			m.Sync()
			require.Len(t, log, len(c.want))
			for i, w := range c.want {
				assert.Equal(t, w.transition, log[i].transition, "Timeout call %d", i)
				assert.Equal(t, w.err, log[i].err, "Context.Err at %v", w.transition)
			}
		})
	}
}

// hinted is an error that asks for a wait, as an HTTP 503 with Retry-After
// or a gRPC RetryInfo detail would.
type hinted struct{ wait time.Duration }

func (h hinted) Error() string             { return "slow down" }
func (h hinted) RetryAfter() time.Duration { return h.wait }

func TestWithHintsLengthensTheOpenPeriod(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want time.Duration
	}{
		{"no hint", errBoom, 5 * time.Second},
		{"a longer hint", hinted{time.Minute}, time.Minute},
		{"a wrapped hint", errors.Join(errBoom, hinted{time.Minute}), time.Minute},
		{"a shorter hint", hinted{time.Second}, 5 * time.Second},
		{"a hint over the cap", hinted{time.Hour}, 10 * time.Minute},
		{"a negative hint", hinted{-time.Hour}, 5 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, mock := startMock(t)
			b := register(t, m, "b", manager.Config{
				Strategy: breaker.Consecutive{Failures: 1},
				Recover:  recover.WithHints(recover.BasicTimeout{Open: 5 * time.Second, ProbeTimeout: time.Second}, 10*time.Minute),
			})
			release(t, b, c.err)
			m.Sync()
			st := b.Stats()
			require.Equal(t, breaker.Open, st.State)
			assert.Equal(t, c.want, st.Until.Sub(st.Since), "open period")
			advance(m, mock, c.want)
			p := probe(t, b)
			m.Sync()
			assert.Equal(t, time.Second, b.Stats().Until.Sub(b.Stats().Since), "the probe's time is the policy's")
			p.Release(nil)
		})
	}
}

func TestWithHintsRejectsANonPositiveLimit(t *testing.T) {
	m, _ := startMock(t)
	_, err := m.Register("b", manager.Config{Recover: recover.WithHints(nil, 0)})
	assert.ErrorContains(t, err, "recover.WithHints.max must be positive, got 0s")
}

// A declined call's OpenError says what opened the breaker: the error of
// the call that tripped it or of the probe that failed, for as long as the
// breaker recovers from that opening.
func TestOpenErrorCause(t *testing.T) {
	errTrip, errProbe := errors.New("connection refused"), errors.New("still refused")
	m, mock := startMock(t)
	b := register(t, m, "payments", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: time.Minute},
	})

	release(t, b, errTrip)
	oe := declined(t, b)
	assert.Equal(t, errTrip, oe.Cause, "declined right after the trip")
	m.Sync()
	oe = declined(t, b)
	assert.Equal(t, errTrip, oe.Cause, "declined once the open period is known")
	assert.False(t, oe.Until.IsZero())
	assert.Contains(t, oe.Error(), `is open until `)
	assert.True(t, strings.HasSuffix(oe.Error(), ", opened by: connection refused"), oe.Error())
	assert.NotErrorIs(t, oe, errTrip, "the cause is not in the declined call's chain")

	advance(m, mock, time.Second)
	p := probe(t, b)
	oe = declined(t, b)
	assert.Equal(t, breaker.Probing, oe.State)
	assert.Equal(t, errTrip, oe.Cause, "while probing, the opening being recovered from")
	p.Release(errProbe)
	assert.Equal(t, errProbe, declined(t, b).Cause, "after the failed probe")

	require.NoError(t, b.ForceOpen())
	assert.Nil(t, declined(t, b).Cause, "forced open by hand")
	require.NoError(t, b.Reset())

	p, err := b.Acquire(context.Background())
	require.NoError(t, err)
	p.ReleaseOutcome(classify.Failure)
	oe = declined(t, b)
	assert.Nil(t, oe.Cause, "released with an outcome only")
	assert.NotContains(t, oe.Error(), "opened by")
}

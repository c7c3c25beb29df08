package manager_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// The zero Config trips on the fifth failure in a row, stays open 30s, gives
// a probe 30s, and classifies errors with classify.Default. The failures
// come through all three ways of calling.
func TestRegisterZeroConfigDefaults(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "zero", manager.Config{})
	ctx := context.Background()
	assert.Equal(t, "zero", b.Name())
	got, ok := m.Breaker("zero")
	require.True(t, ok)
	assert.Same(t, b, got)

	// 1, 2: Acquire and Release.
	p, err := b.Acquire(ctx)
	require.NoError(t, err)
	p.Release(errBoom)
	p, err = b.Acquire(ctx)
	require.NoError(t, err)
	p.Release(context.DeadlineExceeded) // Default: a failure

	// Canceled is ignored by classify.Default: it neither counts nor resets.
	p, err = b.Acquire(ctx)
	require.NoError(t, err)
	p.Release(fmt.Errorf("wrapped: %w", context.Canceled))

	// 3, 4: Do.
	calls := 0
	fn := func(context.Context) error { calls++; return errBoom }
	require.ErrorIs(t, b.Do(ctx, fn), errBoom)
	require.ErrorIs(t, b.Do(ctx, fn), errBoom)
	assert.Equal(t, 2, calls)
	requireState(t, b, breaker.Closed, "after four failures")

	// 5: Call trips it.
	v, err := manager.Call(ctx, b, func(context.Context) (int, error) { return 7, errBoom })
	assert.Equal(t, 7, v, "Call returns fn's value even with an error")
	require.ErrorIs(t, err, errBoom)
	requireState(t, b, breaker.Open, "after the fifth failure")

	st := b.Stats()
	assert.Equal(t, uint64(5), st.Failures)
	assert.Equal(t, uint64(1), st.Ignored)

	// Declined in all three ways, without calling fn.
	t0 := mock.Now()
	m.Sync()
	oe := declined(t, b)
	assert.Equal(t, breaker.Open, oe.State)
	assert.Equal(t, t0.Add(30*time.Second), oe.Until, "default open period is 30s")
	err = b.Do(ctx, fn)
	require.ErrorIs(t, err, breaker.ErrOpen)
	v, err = manager.Call(ctx, b, func(context.Context) (int, error) { calls++; return 1, nil })
	require.ErrorIs(t, err, breaker.ErrOpen)
	assert.Zero(t, v)
	assert.Equal(t, 2, calls, "a declined call must not run fn")

	advance(m, mock, 30*time.Second-time.Nanosecond)
	requireState(t, b, breaker.Open, "1ns before the default open period ends")
	advance(m, mock, time.Nanosecond)
	requireState(t, b, breaker.HalfOpen, "when the default open period ends")

	// The probe may run 30s by default (BasicTimeout's ProbeTimeout is Open).
	t1 := mock.Now()
	pr := probe(t, b)
	m.Sync()
	oe = declined(t, b)
	assert.Equal(t, breaker.Probing, oe.State)
	assert.Equal(t, t1.Add(30*time.Second), oe.Until, "default probe timeout is 30s")

	// Call as the probe: the success closes the breaker.
	pr.Release(nil)
	requireState(t, b, breaker.Closed, "after the probe succeeded")
	v, err = manager.Call(ctx, b, func(context.Context) (int, error) { return 42, nil })
	require.NoError(t, err)
	assert.Equal(t, 42, v)
	require.NoError(t, b.Do(ctx, func(context.Context) error { return nil }))
}

// Four failures, a success, and four more failures do not trip
// Consecutive{Failures: 5}: the success starts the count again.
func TestConsecutiveTripsOnTheFifthFailureInARow(t *testing.T) {
	for _, n := range []int{1, 2, 5, 10} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			m, _ := startMock(t)
			b := register(t, m, "c", manager.Config{Strategy: breaker.Consecutive{Failures: n}})
			if n > 1 {
				fail(t, b, n-1)
				release(t, b, nil)
				fail(t, b, n-1)
				requireState(t, b, breaker.Closed, fmt.Sprintf("after %d failures, a success, %d failures", n-1, n-1))
			}
			fail(t, b, 1)
			requireState(t, b, breaker.Open, fmt.Sprintf("right after failure %d in a row", n))
			assert.Equal(t, breaker.Open, declined(t, b).State)
		})
	}
}

func TestFailureRateTrips(t *testing.T) {
	m, _ := startMock(t)
	b := register(t, m, "rate", manager.Config{Strategy: breaker.FailureRate{Rate: 0.5, Window: 4, MinCalls: 4}})
	release(t, b, nil)
	release(t, b, nil)
	release(t, b, errBoom)
	requireState(t, b, breaker.Closed, "with 3 calls, below MinCalls")
	release(t, b, context.Canceled) // ignored: not a call of the window
	requireState(t, b, breaker.Closed, "after an ignored call")
	release(t, b, errBoom)
	requireState(t, b, breaker.Open, "with 2 failures in 4 calls at Rate 0.5")
}

func TestFailureRateSlidesOverOldCalls(t *testing.T) {
	m, _ := startMock(t)
	b := register(t, m, "rate", manager.Config{Strategy: breaker.FailureRate{Rate: 0.5, Window: 4}})
	// F S S S: 1/4. Then S pushes the failure out; F S S F: 2 of the last 4.
	release(t, b, errBoom)
	release(t, b, nil)
	release(t, b, nil)
	release(t, b, nil)
	release(t, b, nil) // window: S S S S
	release(t, b, errBoom)
	requireState(t, b, breaker.Closed, "1 failure in the last 4 calls")
	release(t, b, errBoom)
	requireState(t, b, breaker.Open, "2 failures in the last 4 calls")
}

// TimeWindow reads the manager's clock: failures older than the window do
// not count.
func TestTimeWindowTripsOnTheMockClock(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "tw", manager.Config{Strategy: breaker.TimeWindow{
		Rate: 0.5, Period: 10 * time.Second, Buckets: 10, MinCalls: 4,
	}})
	release(t, b, errBoom)
	release(t, b, errBoom)
	release(t, b, errBoom)
	requireState(t, b, breaker.Closed, "with 3 calls, below MinCalls")

	advance(m, mock, 11*time.Second) // those three fall out of the window
	release(t, b, errBoom)
	requireState(t, b, breaker.Closed, "1 call in the window after 11s")
	release(t, b, nil)
	release(t, b, nil)
	requireState(t, b, breaker.Closed, "3 calls in the window")
	advance(m, mock, 5*time.Second) // still in the window
	release(t, b, errBoom)
	requireState(t, b, breaker.Open, "2 failures in 4 calls within 10s")
}

// invalidConfigs are Configs that Register and Reconfigure reject, each with
// the breaker it is tried on and the field its error must name.
var invalidConfigs = []struct {
	name  string // the breaker
	cfg   manager.Config
	field string // what the message must name
}{
	{"basic-open", manager.Config{Recover: recover.BasicTimeout{Open: -time.Second}}, "recover.BasicTimeout.Open"},
	{"basic-probe", manager.Config{Recover: recover.BasicTimeout{ProbeTimeout: -1}}, "recover.BasicTimeout.ProbeTimeout"},
	{"exp-initial", manager.Config{Recover: recover.Exponential{Initial: -time.Second}}, "recover.Exponential.Initial"},
	{"exp-zero-initial", manager.Config{Recover: recover.Exponential{}}, "recover.Exponential.Initial"},
	{"exp-max-negative", manager.Config{Recover: recover.Exponential{Initial: time.Second, Max: -time.Second}}, "recover.Exponential.Max"},
	{"exp-max", manager.Config{Recover: recover.Exponential{Initial: 2 * time.Second, Max: time.Second}}, "recover.Exponential.Max"},
	{"exp-multiplier", manager.Config{Recover: recover.Exponential{Initial: time.Second, Multiplier: 0.5}}, "recover.Exponential.Multiplier"},
	{"exp-multiplier-nan", manager.Config{Recover: recover.Exponential{Initial: time.Second, Multiplier: math.NaN()}}, "recover.Exponential.Multiplier"},
	{"exp-jitter", manager.Config{Recover: recover.Exponential{Initial: time.Second, Jitter: 1.5}}, "recover.Exponential.Jitter"},
	{"exp-probe", manager.Config{Recover: recover.Exponential{Initial: time.Second, ProbeTimeout: -time.Second}}, "recover.Exponential.ProbeTimeout"},
	{"func-nil", manager.Config{Recover: recover.Func[int](nil, nil)}, "Config.Recover"},
	{"consecutive", manager.Config{Strategy: breaker.Consecutive{}}, "breaker.Consecutive.Failures"},
	{"consecutive-negative", manager.Config{Strategy: breaker.Consecutive{Failures: -1}}, "breaker.Consecutive.Failures"},
	{"rate-zero", manager.Config{Strategy: breaker.FailureRate{Rate: 0, Window: 10}}, "breaker.FailureRate.Rate"},
	{"rate-negative", manager.Config{Strategy: breaker.FailureRate{Rate: -0.1, Window: 10}}, "breaker.FailureRate.Rate"},
	{"rate-above-one", manager.Config{Strategy: breaker.FailureRate{Rate: 1.01, Window: 10}}, "breaker.FailureRate.Rate"},
	{"rate-nan", manager.Config{Strategy: breaker.FailureRate{Rate: math.NaN(), Window: 10}}, "breaker.FailureRate.Rate"},
	{"rate-window", manager.Config{Strategy: breaker.FailureRate{Rate: 0.5}}, "breaker.FailureRate.Window"},
	{"rate-mincalls", manager.Config{Strategy: breaker.FailureRate{Rate: 0.5, Window: 10, MinCalls: 11}}, "breaker.FailureRate.MinCalls"},
	{"tw-rate", manager.Config{Strategy: breaker.TimeWindow{Rate: 2, Period: time.Second, MinCalls: 1}}, "breaker.TimeWindow.Rate"},
	{"tw-period", manager.Config{Strategy: breaker.TimeWindow{Rate: 0.5, Period: -time.Second, MinCalls: 1}}, "breaker.TimeWindow.Period"},
	{"tw-mincalls", manager.Config{Strategy: breaker.TimeWindow{Rate: 0.5, Period: time.Second}}, "breaker.TimeWindow.MinCalls"},
}

func TestRegisterValidation(t *testing.T) {
	cases := invalidConfigs
	m, _ := startMock(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := m.Register(c.name, c.cfg)
			require.Error(t, err, "Register(%q, %+v)", c.name, c.cfg)
			assert.Nil(t, b)
			msg := err.Error()
			assert.Contains(t, msg, fmt.Sprintf("%q", c.name), "the error must name the breaker")
			assert.Contains(t, msg, c.field, "the error must name the field")
			assert.True(t, strings.HasPrefix(msg, "fusebox: "), "error %q must start with the domain", msg)
			_, ok := m.Breaker(c.name)
			assert.False(t, ok, "a rejected breaker must not be registered")
		})
	}
	assert.Empty(t, m.Breakers())
}

func TestRegisterValidationConfigError(t *testing.T) {
	m, _ := startMock(t)
	_, err := m.Register("exp", manager.Config{Recover: recover.Exponential{Initial: 2 * time.Second, Max: time.Second}})
	var ce *breaker.ConfigError
	require.ErrorAs(t, err, &ce, "a policy's error stays reachable")
	assert.Equal(t, "recover.Exponential.Max", ce.Field)

	_, err = m.Register("rate", manager.Config{Strategy: breaker.FailureRate{Rate: 1.5, Window: 10}})
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "breaker.FailureRate.Rate", ce.Field)
}

func TestRegisterEmptyName(t *testing.T) {
	m, _ := startMock(t)
	b, err := m.Register("", manager.Config{})
	require.Error(t, err)
	assert.Nil(t, b)
	assert.Contains(t, err.Error(), "name")
	assert.Empty(t, m.Breakers())
}

func TestRegisterDuplicate(t *testing.T) {
	m, _ := startMock(t)
	first := register(t, m, "payments", manager.Config{})
	b, err := m.Register("payments", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	require.Error(t, err)
	assert.Nil(t, b)
	assert.ErrorIs(t, err, manager.ErrDuplicate)
	assert.False(t, errors.Is(err, manager.ErrStopped))
	assert.Contains(t, err.Error(), `"payments"`)
	got, ok := m.Breaker("payments")
	require.True(t, ok)
	assert.Same(t, first, got, "the first registration stands")
	assert.Len(t, m.Breakers(), 1)
}

// A custom classifier decides outcomes, nil included.
func TestRegisterCustomClassifier(t *testing.T) {
	m, _ := startMock(t)
	errUser := errors.New("bad request")
	b := register(t, m, "custom", manager.Config{
		Strategy: breaker.Consecutive{Failures: 2},
		Classify: func(err error) classify.Outcome {
			switch {
			case err == nil:
				return classify.Failure // a nil from this service means it lost the data
			case errors.Is(err, errUser):
				return classify.Ignore
			}
			return classify.Success
		},
	})
	release(t, b, errUser)
	release(t, b, errBoom) // a success for this classifier
	release(t, b, nil)
	requireState(t, b, breaker.Closed, "after one failure")
	release(t, b, nil)
	requireState(t, b, breaker.Open, "after two nil results classified as failures")
	st := b.Stats()
	assert.Equal(t, uint64(1), st.Ignored)
	assert.Equal(t, uint64(1), st.Successes)
	assert.Equal(t, uint64(2), st.Failures)
}

// A classifier that returns a value that is not an outcome counts as a
// failure.
func TestInvalidOutcomeIsAFailure(t *testing.T) {
	m, _ := startMock(t)
	b := register(t, m, "odd", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Classify: func(error) classify.Outcome { return 0 },
	})
	release(t, b, nil)
	requireState(t, b, breaker.Open, "after an invalid outcome")
	assert.Equal(t, uint64(1), b.Stats().Failures)
}

func TestBreakersInRegistrationOrder(t *testing.T) {
	m, _ := startMock(t)
	names := []string{"c", "a", "b"}
	for _, n := range names {
		register(t, m, n, manager.Config{})
	}
	var got []string
	for _, b := range m.Breakers() {
		got = append(got, b.Name())
	}
	assert.Equal(t, names, got)
	_, ok := m.Breaker("missing")
	assert.False(t, ok)
}

// nilCounter is a Strategy whose NewCounter forgets to return a Counter.
type nilCounter struct{}

func (nilCounter) NewCounter() (breaker.Counter, error) { return nil, nil }

// totalFailures is a custom Strategy: it trips on the Limit-th failure since
// the breaker closed, successes or not.
type totalFailures struct{ Limit int32 }

type totalCounter struct {
	n     atomic.Int32
	limit int32
}

func (s totalFailures) NewCounter() (breaker.Counter, error) {
	return &totalCounter{limit: s.Limit}, nil
}

func (c *totalCounter) Record(o classify.Outcome, _ time.Time) bool {
	return o == classify.Failure && c.n.Add(1) == c.limit
}
func (c *totalCounter) Reset()          { c.n.Store(0) }
func (c *totalCounter) UsesClock() bool { return false }

func TestRegisterNilCounter(t *testing.T) {
	m, _ := startMock(t)
	_, err := m.Register("nil-counter", manager.Config{Strategy: nilCounter{}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"nil-counter"`)
	assert.Contains(t, err.Error(), "Config.Strategy")
}

// A Strategy of the user's own works through the manager, and its counter
// is cleared when the breaker closes again.
func TestCustomStrategy(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "custom", manager.Config{
		Strategy: totalFailures{Limit: 3},
		Recover:  recover.BasicTimeout{Open: time.Second},
	})
	for range 2 {
		release(t, b, errBoom)
		release(t, b, nil)
	}
	requireState(t, b, breaker.Closed, "after two failures")
	release(t, b, errBoom)
	requireState(t, b, breaker.Open, "after the third failure in all")
	advance(m, mock, time.Second)
	probe(t, b).Release(nil)
	release(t, b, errBoom)
	release(t, b, errBoom)
	requireState(t, b, breaker.Closed, "the count starts again after recovery")
}

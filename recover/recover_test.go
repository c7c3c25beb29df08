package recover_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/recover"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The three transitions a Recover is asked about.
var (
	tripped = recover.Context{Name: "svc", Transition: breaker.Transition{From: breaker.Closed, To: breaker.Open}, Outcome: classify.Failure}
	failed  = recover.Context{Name: "svc", Transition: breaker.Transition{From: breaker.Probing, To: breaker.Open}, Outcome: classify.Failure}
	probe   = recover.Context{Name: "svc", Transition: breaker.Transition{From: breaker.HalfOpen, To: breaker.Probing}}
)

func name(c recover.Context) string { return c.Transition.String() }

// durations calls Init, then Timeout for each context in turn, handing each
// call the state the previous one returned, as the manager does.
func durations(t *testing.T, r recover.Recover, cs ...recover.Context) []time.Duration {
	t.Helper()
	state, err := r.Init()
	require.NoError(t, err, "%T.Init()", r)
	ds := make([]time.Duration, len(cs))
	for i, c := range cs {
		ds[i], state = r.Timeout(c, state)
	}
	return ds
}

// requireField checks that err is a *breaker.ConfigError naming field.
func requireField(t *testing.T, err error, field, input string) {
	t.Helper()
	var ce *breaker.ConfigError
	if !assert.True(t, errors.As(err, &ce), "%s: Init() error %v is not a *breaker.ConfigError", input, err) {
		return
	}
	assert.Equal(t, field, ce.Field, "%s: the field named", input)
	assert.NotEmpty(t, ce.Problem, "%s", input)
}

func TestBasicTimeout(t *testing.T) {
	tests := []struct {
		b          recover.BasicTimeout
		open, prob time.Duration
	}{
		{recover.BasicTimeout{}, 30 * time.Second, 30 * time.Second},
		{recover.BasicTimeout{Open: 5 * time.Second}, 5 * time.Second, 5 * time.Second},
		{recover.BasicTimeout{ProbeTimeout: 2 * time.Second}, 30 * time.Second, 2 * time.Second},
		{recover.BasicTimeout{Open: time.Minute, ProbeTimeout: time.Second}, time.Minute, time.Second},
		{recover.BasicTimeout{Open: time.Nanosecond}, time.Nanosecond, time.Nanosecond},
	}
	for _, tt := range tests {
		got := durations(t, tt.b, tripped, probe, failed, probe, failed, tripped)
		want := []time.Duration{tt.open, tt.prob, tt.open, tt.prob, tt.open, tt.open}
		assert.Equal(t, want, got, "%+v: tripped, probe, failed, probe, failed, tripped", tt.b)
	}
}

func TestBasicTimeoutValidation(t *testing.T) {
	tests := []struct {
		b     recover.BasicTimeout
		field string
	}{
		{recover.BasicTimeout{Open: -time.Second}, "recover.BasicTimeout.Open"},
		{recover.BasicTimeout{Open: -1}, "recover.BasicTimeout.Open"},
		{recover.BasicTimeout{Open: time.Second, ProbeTimeout: -time.Second}, "recover.BasicTimeout.ProbeTimeout"},
		{recover.BasicTimeout{ProbeTimeout: -1}, "recover.BasicTimeout.ProbeTimeout"},
	}
	for _, tt := range tests {
		state, err := tt.b.Init()
		assert.Nil(t, state, "%+v", tt.b)
		requireField(t, err, tt.field, fmt.Sprintf("%+v", tt.b))
	}
}

func TestExponentialGrowsAndCaps(t *testing.T) {
	e := recover.Exponential{Initial: time.Second, Max: 10 * time.Second}
	got := durations(t, e, tripped, probe, failed, probe, failed, probe, failed, probe, failed, probe, failed)
	want := []time.Duration{
		time.Second, time.Second, // tripped; the probe's time is Initial
		2 * time.Second, time.Second,
		4 * time.Second, time.Second,
		8 * time.Second, time.Second,
		10 * time.Second, time.Second, // 16s capped at Max
		10 * time.Second,
	}
	assert.Equal(t, want, got)
}

func TestExponentialStartsAgainAfterRecovery(t *testing.T) {
	// A successful probe closes the breaker without asking the policy, so
	// the next {closed, open} follows a recovery: back to Initial.
	e := recover.Exponential{Initial: time.Second, Max: time.Minute}
	got := durations(t, e, tripped, probe, failed, probe, failed, tripped, probe, failed)
	want := []time.Duration{
		time.Second, time.Second, 2 * time.Second, time.Second, 4 * time.Second,
		time.Second, time.Second, 2 * time.Second,
	}
	assert.Equal(t, want, got)
}

func TestExponentialProbeTimeoutDoesNotAdvance(t *testing.T) {
	// A probe that runs out of time (probing -> half_open) asks nothing;
	// the next probe's time and the next failure's period follow on.
	e := recover.Exponential{Initial: time.Second, ProbeTimeout: 500 * time.Millisecond}
	got := durations(t, e, tripped, probe, probe, probe, failed)
	assert.Equal(t, []time.Duration{time.Second, 500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}, got)
}

func TestExponentialMultiplier(t *testing.T) {
	tests := []struct {
		m    float64
		want []time.Duration
	}{
		{0, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}},
		{2, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}},
		{3, []time.Duration{time.Second, 3 * time.Second, 9 * time.Second, 27 * time.Second}},
		{1.5, []time.Duration{time.Second, 1500 * time.Millisecond, 2250 * time.Millisecond, 3375 * time.Millisecond}},
		{1, []time.Duration{time.Second, time.Second, time.Second, time.Second}},
	}
	for _, tt := range tests {
		e := recover.Exponential{Initial: time.Second, Multiplier: tt.m}
		assert.Equal(t, tt.want, durations(t, e, tripped, failed, failed, failed), "Multiplier %v", tt.m)
	}
}

func TestExponentialWithoutMaxNeverOverflows(t *testing.T) {
	e := recover.Exponential{Initial: time.Hour, Multiplier: 10}
	cs := []recover.Context{tripped}
	for range 40 {
		cs = append(cs, failed)
	}
	ds := durations(t, e, cs...)
	for i := 1; i < len(ds); i++ {
		require.GreaterOrEqual(t, ds[i], ds[i-1], "period %d shrank: %v after %v", i, ds[i], ds[i-1])
	}
	assert.Equal(t, time.Duration(math.MaxInt64), ds[len(ds)-1], "an uncapped period saturates at the longest Duration")
}

func TestExponentialProbeTimeout(t *testing.T) {
	tests := []struct {
		e    recover.Exponential
		want time.Duration
	}{
		{recover.Exponential{Initial: 3 * time.Second}, 3 * time.Second},
		{recover.Exponential{Initial: 3 * time.Second, Max: time.Minute}, 3 * time.Second},
		{recover.Exponential{Initial: 3 * time.Second, ProbeTimeout: time.Second}, time.Second},
		{recover.Exponential{Initial: time.Second, ProbeTimeout: time.Hour, Jitter: 1, Rand: rand.New(rand.NewPCG(1, 1))}, time.Hour},
	}
	for _, tt := range tests {
		got := durations(t, tt.e, tripped, probe, failed, failed, probe)
		assert.Equal(t, tt.want, got[1], "%+v: first probe", tt.e)
		assert.Equal(t, tt.want, got[4], "%+v: probe after the period grew", tt.e)
	}
}

func TestExponentialJitter(t *testing.T) {
	base := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second, time.Second}
	seq := []recover.Context{tripped, failed, failed, failed, failed, failed, tripped}
	for _, jitter := range []float64{0.1, 0.5, 1} {
		t.Run(fmt.Sprint(jitter), func(t *testing.T) {
			policy := func(seed uint64) recover.Exponential {
				return recover.Exponential{
					Initial: time.Second, Max: 10 * time.Second, Jitter: jitter,
					Rand: rand.New(rand.NewPCG(seed, 2)),
				}
			}
			got := durations(t, policy(1), seq...)
			for i, d := range got {
				lo := time.Duration(float64(base[i]) * (1 - jitter))
				assert.True(t, d >= lo && d <= base[i], "period %d: %v not in [%v, %v]", i, d, lo, base[i])
			}
			assert.Equal(t, got, durations(t, policy(1), seq...), "the same seed gives the same periods")
			assert.NotEqual(t, got, durations(t, policy(99), seq...), "another seed gives other periods")
			assert.NotEqual(t, base, got, "jitter %v changed no period", jitter)
		})
	}
}

func TestExponentialJitterFixedSeed(t *testing.T) {
	// The periods drawn from a fixed PCG seed, computed independently of
	// the policy: base * (1 - Jitter*U) with U the source's Float64s.
	const jitter = 0.25
	e := recover.Exponential{Initial: time.Second, Max: 8 * time.Second, Jitter: jitter, Rand: rand.New(rand.NewPCG(7, 11))}
	got := durations(t, e, tripped, probe, failed, probe, failed)

	u := rand.New(rand.NewPCG(7, 11))
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) * (1 - jitter*u.Float64())) }
	want := []time.Duration{scale(time.Second), time.Second, scale(2 * time.Second), time.Second, scale(4 * time.Second)}
	assert.Equal(t, want, got, "the probe's time is not jittered and draws nothing")
}

func TestExponentialJitterWithoutRand(t *testing.T) {
	// A nil Rand means a randomly seeded source of the breaker's own: the
	// periods still lie in range.
	e := recover.Exponential{Initial: time.Second, Jitter: 0.5}
	for i, d := range durations(t, e, tripped, failed, failed) {
		hi := time.Second << i
		assert.True(t, d >= hi/2 && d <= hi, "period %d: %v not in [%v, %v]", i, d, hi/2, hi)
	}
}

func TestExponentialValidation(t *testing.T) {
	tests := []struct {
		e     recover.Exponential
		field string
	}{
		{recover.Exponential{}, "recover.Exponential.Initial"},
		{recover.Exponential{Initial: -time.Second}, "recover.Exponential.Initial"},
		{recover.Exponential{Initial: time.Second, Max: 999 * time.Millisecond}, "recover.Exponential.Max"},
		{recover.Exponential{Initial: time.Second, Max: -time.Second}, "recover.Exponential.Max"},
		{recover.Exponential{Initial: time.Second, Multiplier: 0.5}, "recover.Exponential.Multiplier"},
		{recover.Exponential{Initial: time.Second, Multiplier: -2}, "recover.Exponential.Multiplier"},
		{recover.Exponential{Initial: time.Second, Multiplier: math.NaN()}, "recover.Exponential.Multiplier"},
		{recover.Exponential{Initial: time.Second, Jitter: -0.1}, "recover.Exponential.Jitter"},
		{recover.Exponential{Initial: time.Second, Jitter: 1.01}, "recover.Exponential.Jitter"},
		{recover.Exponential{Initial: time.Second, Jitter: math.NaN()}, "recover.Exponential.Jitter"},
		{recover.Exponential{Initial: time.Second, ProbeTimeout: -time.Second}, "recover.Exponential.ProbeTimeout"},
	}
	for _, tt := range tests {
		state, err := tt.e.Init()
		assert.Nil(t, state, "%+v", tt.e)
		requireField(t, err, tt.field, fmt.Sprintf("%+v", tt.e))
	}

	valid := []recover.Exponential{
		{Initial: time.Nanosecond},
		{Initial: time.Second, Max: time.Second},
		{Initial: time.Second, Multiplier: 1},
		{Initial: time.Second, Jitter: 1},
		{Initial: time.Second, Jitter: 0},
	}
	for _, e := range valid {
		_, err := e.Init()
		assert.NoError(t, err, "%+v", e)
	}
}

// The doubling policy of Func's doc doubles the open period only: each
// probe may run one second, and leaves the next open period as it is.
func TestFuncDoubling(t *testing.T) {
	r := recover.Func(
		func() (time.Duration, error) { return time.Second, nil },
		func(c recover.Context, open time.Duration) (time.Duration, time.Duration) {
			if c.Transition.To != breaker.Open {
				return time.Second, open // a probe may run 1s; the open period stays
			}
			return open, 2 * open
		},
	)
	got := durations(t, r, tripped, probe, failed, probe, failed, probe)
	assert.Equal(t, []time.Duration{time.Second, time.Second, 2 * time.Second, time.Second, 4 * time.Second, time.Second}, got)
}

func TestFuncSeesTheContext(t *testing.T) {
	var seen []recover.Context
	r := recover.Func(nil, func(c recover.Context, n int) (time.Duration, int) {
		seen = append(seen, c)
		return time.Duration(n) * time.Second, n + 1
	})
	got := durations(t, r, tripped, probe, failed)
	assert.Equal(t, []time.Duration{0, time.Second, 2 * time.Second}, got, "a nil init starts from the zero value")
	assert.Equal(t, []recover.Context{tripped, probe, failed}, seen)
}

func TestFuncInitErrors(t *testing.T) {
	errBad := errors.New("bad policy")
	r := recover.Func(
		func() (int, error) { return 0, errBad },
		func(recover.Context, int) (time.Duration, int) { return 0, 0 },
	)
	state, err := r.Init()
	assert.ErrorIs(t, err, errBad, "init's error is returned")
	assert.Nil(t, state)

	// A nil timeout is a configuration mistake like any other: Init fails
	// with a *breaker.ConfigError naming it, so that Register reports it the
	// same way as a bad field of a built-in policy.
	state, err = recover.Func[int](func() (int, error) { return 1, nil }, nil).Init()
	assert.Nil(t, state)
	requireField(t, err, "recover.Func.timeout", "Func(init, nil)")
	_, err = recover.Func[int](nil, nil).Init()
	requireField(t, err, "recover.Func.timeout", "Func(nil, nil)")
}

func TestFuncWrongState(t *testing.T) {
	// A state of another type (a manager never passes one) gives the
	// timeout function S's zero value rather than a panic.
	r := recover.Func(nil, func(_ recover.Context, d time.Duration) (time.Duration, time.Duration) { return d + time.Second, d })
	d, _ := r.Timeout(tripped, "not a duration")
	assert.Equal(t, time.Second, d)
}

func TestPoliciesAreRecovers(t *testing.T) {
	// Each built-in satisfies the interface by value, as Config takes it.
	for _, r := range []recover.Recover{
		recover.BasicTimeout{},
		recover.Exponential{Initial: time.Second},
		recover.Func[int](nil, func(recover.Context, int) (time.Duration, int) { return time.Second, 0 }),
	} {
		state, err := r.Init()
		require.NoError(t, err, "%T", r)
		for _, c := range []recover.Context{tripped, probe, failed} {
			d, next := r.Timeout(c, state)
			assert.Positive(t, d, "%T.Timeout(%s)", r, name(c))
			state = next
		}
	}
}

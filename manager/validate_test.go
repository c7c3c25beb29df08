package manager_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

// A name is refused, with an error saying so, unless it is 1 to 256 bytes of
// printable UTF-8; the error quotes at most a short start of a long name.
func TestRegisterNames(t *testing.T) {
	const maxNameLen = 256
	m, _ := startMock(t)
	for _, name := range []string{
		"payments", "api.example.com:443", "GET /v1/orders/{id}", "日本語", "naïve café", "a b", "emoji 🔥",
		strings.Repeat("x", maxNameLen), strings.Repeat("é", maxNameLen/2),
	} {
		_, err := m.Register(name, manager.Config{})
		assert.NoError(t, err, "Register(%q)", name)
	}
	for _, c := range []struct{ what, name string }{
		{"empty", ""},
		{"one byte too long", strings.Repeat("x", maxNameLen+1)},
		{"a mebibyte", strings.Repeat("y", 1<<20)},
		{"newline", "pay\nments"},
		{"carriage return", "pay\rments"},
		{"tab", "pay\tments"},
		{"NUL", "pay\x00ments"},
		{"DEL", "pay\x7fments"},
		{"C1 control", "pay\u0085ments"},
		{"invalid UTF-8", "pay\xffments"},
		{"a lone continuation byte", "\x80"},
		{"a surrogate half", "\xed\xa0\x80"},
		{"bidirectional override", "pay\u202ements"},
		{"zero-width space", "pay\u200bments"},
		{"line separator", "pay\u2028ments"},
		{"no-break space", "pay\u00a0ments"},
	} {
		t.Run(c.what, func(t *testing.T) {
			b, err := m.Register(c.name, manager.Config{})
			require.ErrorContains(t, err, "invalid breaker name", "Register(%q)", clipName(c.name))
			assert.Nil(t, b)
			msg := err.Error()
			assert.True(t, strings.HasPrefix(msg, "fusebox: "), msg)
			assert.Less(t, len(msg), 512, "the error must stay short: %q", clipName(msg))
			assert.NotContains(t, msg, "\n", "the error must print on one line")
			assert.True(t, strings.Contains(msg, "name"), "the error must say the name is at fault: %q", msg)
		})
	}
	assert.Len(t, m.Breakers(), 9, "only the valid names are registered")
}

func clipName(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// panicStrategy's NewCounter panics.
type panicStrategy struct{}

func (panicStrategy) NewCounter() (breaker.Counter, error) { panic("no counter for you") }

// ptrStrategy has a value receiver: a nil *ptrStrategy in the interface
// panics when its method is called.
type ptrStrategy struct{ breaker.Consecutive }

// ptrRecover is a Recover whose methods have value receivers.
type ptrRecover struct{ recover.BasicTimeout }

// panicInit is a Recover whose Init panics.
type panicInit struct{ recover.BasicTimeout }

func (panicInit) Init() (any, error) { panic("init exploded") }

// Every bad field of a Config is an error that names the breaker and the
// field, including values so large that honouring them would take all the
// memory there is, and callbacks that panic while they are checked.
func TestRegisterBounds(t *testing.T) {
	cases := []struct {
		name  string
		cfg   manager.Config
		field string
	}{
		{"rate-window-maxint", manager.Config{Strategy: breaker.FailureRate{Rate: 0.5, Window: math.MaxInt}}, "breaker.FailureRate.Window"},
		{"rate-window-2^40", manager.Config{Strategy: breaker.FailureRate{Rate: 0.5, Window: 1 << 40}}, "breaker.FailureRate.Window"},
		{"rate-window-max+1", manager.Config{Strategy: breaker.FailureRate{Rate: 0.5, Window: 1<<20 + 1}}, "breaker.FailureRate.Window"},
		{"rate-window-negative", manager.Config{Strategy: breaker.FailureRate{Rate: 0.5, Window: -1}}, "breaker.FailureRate.Window"},
		{"rate-mincalls-negative", manager.Config{Strategy: breaker.FailureRate{Rate: 0.5, Window: 10, MinCalls: -1}}, "breaker.FailureRate.MinCalls"},
		{"rate-inf", manager.Config{Strategy: breaker.FailureRate{Rate: math.Inf(1), Window: 10}}, "breaker.FailureRate.Rate"},
		{"tw-buckets-maxint", manager.Config{Strategy: breaker.TimeWindow{Rate: 0.5, Period: time.Hour, Buckets: math.MaxInt, MinCalls: 1}}, "breaker.TimeWindow.Buckets"},
		{"tw-buckets-negative", manager.Config{Strategy: breaker.TimeWindow{Rate: 0.5, Period: time.Hour, Buckets: -1, MinCalls: 1}}, "breaker.TimeWindow.Buckets"},
		{"tw-buckets-too-thin", manager.Config{Strategy: breaker.TimeWindow{Rate: 0.5, Period: time.Millisecond, Buckets: 10, MinCalls: 1}}, "breaker.TimeWindow.Buckets"},
		{"tw-period-zero", manager.Config{Strategy: breaker.TimeWindow{Rate: 0.5, MinCalls: 1}}, "breaker.TimeWindow.Period"},
		{"tw-period-minint", manager.Config{Strategy: breaker.TimeWindow{Rate: 0.5, Period: math.MinInt64, MinCalls: 1}}, "breaker.TimeWindow.Period"},
		{"consecutive-minint", manager.Config{Strategy: breaker.Consecutive{Failures: math.MinInt}}, "breaker.Consecutive.Failures"},
		{"strategy-panics", manager.Config{Strategy: panicStrategy{}}, "Config.Strategy"},
		{"strategy-nil-pointer", manager.Config{Strategy: (*ptrStrategy)(nil)}, "Config.Strategy"},
		{"recover-nil-pointer", manager.Config{Recover: (*ptrRecover)(nil)}, "Config.Recover"},
		{"recover-init-panics", manager.Config{Recover: panicInit{}}, "Config.Recover"},
		{"basic-open-minint", manager.Config{Recover: recover.BasicTimeout{Open: math.MinInt64}}, "recover.BasicTimeout.Open"},
		{"exp-jitter-nan", manager.Config{Recover: recover.Exponential{Initial: time.Second, Jitter: math.NaN()}}, "recover.Exponential.Jitter"},
		{"exp-multiplier-inf", manager.Config{Recover: recover.Exponential{Initial: time.Second, Multiplier: math.Inf(-1)}}, "recover.Exponential.Multiplier"},
		{"store-nil-pointer", manager.Config{Store: (*store.Memory)(nil)}, "Config.Store"},
		{"fallback-unknown", manager.Config{Store: store.NewMemory(nil), Fallback: 200}, "Config.Fallback"},
	}
	m, _ := startMock(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b *manager.Breaker
			var err error
			require.NotPanics(t, func() { b, err = m.Register(c.name, c.cfg) })
			require.Error(t, err)
			assert.Nil(t, b)
			msg := err.Error()
			assert.Contains(t, msg, fmt.Sprintf("%q", c.name), "the error must name the breaker")
			assert.Contains(t, msg, c.field, "the error must name the field")
		})
	}
	assert.Empty(t, m.Breakers())

	// The largest window is accepted.
	register(t, m, "rate-window-max", manager.Config{Strategy: breaker.FailureRate{Rate: 0.5, Window: 1 << 20}})
	// A breaker refused for a panicking callback leaves the manager running.
	m.Sync()
	select {
	case <-m.Done():
		t.Fatal("the manager stopped")
	default:
	}
}

// Do and Call with a nil function, and Acquire, Do and Call with a nil
// context, return an error naming the breaker and count nothing: a one-
// failure breaker stays closed.
func TestNilFuncAndContext(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "nils", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second},
	})
	called := false
	fn := func(context.Context) error { called = true; return errBoom }
	var nilCtx context.Context

	for _, c := range []struct {
		what   string
		err    error
		want   string
		method string // the method the error names
	}{
		{"Do(ctx, nil)", b.Do(context.Background(), nil), "nil function", "Do"},
		{"Call(ctx, b, nil)", func() error {
			_, err := manager.Call[int](context.Background(), b, nil)
			return err
		}(), "nil function", "Call"},
		{"Do(nil, fn)", b.Do(nilCtx, fn), "nil context", "Do"},
		{"Call(nil, b, fn)", func() error {
			_, err := manager.Call(nilCtx, b, func(context.Context) (int, error) { called = true; return 0, errBoom })
			return err
		}(), "nil context", "Call"},
		{"Acquire(nil)", func() error { _, err := b.Acquire(nilCtx); return err }(), "nil context", "Acquire"},
	} {
		assert.ErrorContains(t, c.err, c.want, c.what)
		if c.err != nil {
			assert.Contains(t, c.err.Error(), `"nils"`, "%s: the error names the breaker", c.what)
			assert.Contains(t, c.err.Error(), ": "+c.method+": ", "%s: the error names the method called: %v", c.what, c.err)
			assert.Equal(t, 1, strings.Count(c.err.Error(), "fusebox:"), "%s: one domain prefix: %v", c.what, c.err)
		}
	}
	assert.False(t, called, "no function was called")
	m.Sync()
	assert.Equal(t, breaker.Closed, b.State(), "nothing counted against the service")
	assert.Zero(t, b.Stats().Calls)

	// The same holds in half_open, where a nil context would have been read.
	fail(t, b, 1)
	advance(m, mock, time.Second)
	requireState(t, b, breaker.HalfOpen, "after the open period")
	_, err := b.Acquire(nilCtx)
	assert.ErrorContains(t, err, "nil context")
	requireState(t, b, breaker.HalfOpen, "a nil context takes no probe")
}

// laterPanics is a Strategy whose NewCounter works the first few times, then
// panics.
type laterPanics struct{ calls *atomic.Int32 }

func (s laterPanics) NewCounter() (breaker.Counter, error) {
	if s.calls.Add(1) > 2 { // the check in Register, and the first period
		panic("no more counters")
	}
	return breaker.Consecutive{Failures: 1}.NewCounter()
}

// A Strategy whose NewCounter panics after Register is not a panic of the
// library: a breaker closing again (a probe's success on a caller's
// goroutine, a restart on the manager's) counts in its first counter.
func TestStrategyPanicsLater(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "later", manager.Config{
		Strategy: laterPanics{calls: new(atomic.Int32)},
		Recover:  recover.BasicTimeout{Open: time.Second},
	})
	fail(t, b, 1)
	advance(m, mock, time.Second)
	p := probe(t, b)
	require.NotPanics(t, func() { p.Release(nil) }, "the probe's success closes the breaker")
	m.Sync()
	requireState(t, b, breaker.Closed, "after the probe")
	require.NotPanics(t, func() { require.NoError(t, b.ForceOpen()); require.NoError(t, b.Reset()) })
	fail(t, b, 1)
	m.Sync()
	requireState(t, b, breaker.Open, "the first counter still trips")
}

package manager_test

import (
	"context"
	"errors"
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

// A Classifier that panics inside Do: the panic reaches the caller, as a
// panic of fn would, and the call is released as a failure, so the probe
// slot it held is not left taken until the probe's time runs out.
func TestFaultClassifierPanicInDo(t *testing.T) {
	m, mock := startMock(t)
	errOdd := errors.New("unclassifiable")
	b := register(t, m, "picky", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: 2 * time.Second},
		Classify: func(err error) classify.Outcome {
			if errors.Is(err, errOdd) {
				panic("classifier exploded")
			}
			return classify.Default(err)
		},
	})
	fail(t, b, 1)
	advance(m, mock, time.Second)
	requireState(t, b, breaker.HalfOpen, "after the open period")
	assert.PanicsWithValue(t, "classifier exploded", func() {
		_ = b.Do(context.Background(), func(context.Context) error { return errOdd })
	})
	m.Sync()
	requireState(t, b, breaker.Open, "the probe released as a failure re-opens the breaker")
	st := b.Stats()
	assert.Equal(t, uint64(2), st.Failures, "the trip and the probe")
	assert.Equal(t, st.Calls, st.Successes+st.Failures+st.Ignored+st.Declined)
	advance(m, mock, time.Second)
	probe(t, b).Release(nil)
	requireState(t, b, breaker.Closed, "after a good probe")
}

// lateHook holds up the Record call of the first failure recorded while
// hold is set, until release is closed: as a caller preempted between the
// breaker's generation check and its counter would be.
type lateHook struct {
	hold    atomic.Bool
	entered chan struct{}
	release chan struct{}
}

// lateStrategy is Consecutive{Failures: 2} whose counters go through a
// lateHook.
type lateStrategy struct{ hook *lateHook }

func (s lateStrategy) NewCounter() (breaker.Counter, error) {
	inner, err := breaker.Consecutive{Failures: 2}.NewCounter()
	return &lateCounter{Counter: inner, hook: s.hook}, err
}

type lateCounter struct {
	breaker.Counter
	hook *lateHook
}

func (c *lateCounter) Record(o classify.Outcome, now time.Time) bool {
	if o == classify.Failure && c.hook.hold.CompareAndSwap(true, false) {
		close(c.hook.entered)
		<-c.hook.release
	}
	return c.Counter.Record(o, now)
}

// A late result from an old state must not count in the new one: a
// failure of a call admitted before the breaker tripped, whose caller was
// preempted between the breaker's generation check and its counter, lands
// after the breaker has recovered. The breaker, which trips on the second
// failure in a row, must still need two failures of its new generation.
func TestFaultLateReleaseAfterRecovery(t *testing.T) {
	m, mock := startMock(t)
	c := &lateHook{entered: make(chan struct{}), release: make(chan struct{})}
	b := register(t, m, "late", manager.Config{
		Strategy: lateStrategy{c},
		Recover:  recover.BasicTimeout{Open: time.Second},
	})
	old, err := b.Acquire(context.Background())
	require.NoError(t, err)
	c.hold.Store(true)
	released := make(chan struct{})
	go func() { defer close(released); old.Release(errBoom) }()
	<-c.entered // the old call passed the generation check

	fail(t, b, 2)
	requireState(t, b, breaker.Open, "tripped by two failures")
	advance(m, mock, time.Second)
	probe(t, b).Release(nil)
	requireState(t, b, breaker.Closed, "recovered")
	close(c.release)
	<-released

	fail(t, b, 1)
	m.Sync()
	requireState(t, b, breaker.Closed, "after one failure of the new generation (and the old call's late failure)")
	fail(t, b, 1)
	requireState(t, b, breaker.Open, "the second failure of the new generation trips it")
}

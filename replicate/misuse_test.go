package replicate_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/replicate"
	"github.com/fusebox-go/fusebox/replicate/replicatetest"
)

func TestNilContextIsAnError(t *testing.T) {
	g := newRig(t, replicate.NewMemory(), false, replicate.Options{})
	var nilCtx context.Context
	check := func(method string, err error) {
		t.Helper()
		assert.ErrorIs(t, err, replicate.ErrNilContext, method)
		if err != nil {
			assert.Contains(t, err.Error(), `breaker "replica": `+method, "%s: the error names the breaker and the method", method)
		}
	}
	_, err := g.r.Put(nilCtx, "a", []byte("1"))
	check("Put", err)
	_, err = g.r.Delete(nilCtx, "a")
	check("Delete", err)
	_, _, err = g.r.Get(nilCtx, "a")
	check("Get", err)
	check("Wait", g.r.Wait(nilCtx))
	assert.Equal(t, 0, g.r.Pending(), "nothing was written")
	assert.Equal(t, 0, g.replica.Calls())
}

// logBuffer is a slog handler's output, safe to read while the replicator
// writes to it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// panicsOnError is a Classifier that panics on every error.
func panicsOnError(err error) classify.Outcome {
	if err != nil {
		panic("classifier: " + err.Error())
	}
	return classify.Success
}

// eventually polls cond, with a deadline, for something that a goroutine
// of the replicator does.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "waiting until %s", what)
		time.Sleep(time.Millisecond)
	}
}

// TestClassifierPanicInCatchUp: a Classifier that panics while catch-up
// runs on the replicator's goroutine is recovered and logged; the process
// lives on, the keys stay pending, and catch-up finishes once the replica
// answers without an error.
func TestClassifierPanicInCatchUp(t *testing.T) {
	m := manager.Start(manager.Options{})
	defer m.Stop()
	b, err := m.Register("replica", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1 << 20},
		Classify: panicsOnError,
	})
	require.NoError(t, err)
	primary := replicate.NewMemory()
	ctx := context.Background()
	for _, k := range []string{"x", "y"} {
		require.NoError(t, primary.Put(ctx, k, []byte(k)))
	}
	replica := replicatetest.NewReplica()
	replica.Fail(nil)
	var logs logBuffer
	r, err := replicate.New(primary, replica, b, replicate.Options{RetryInterval: 5 * time.Millisecond, Logger: logs.logger()})
	require.NoError(t, err)
	defer r.Close()

	eventually(t, "catch-up meets the panic", func() bool { return strings.Contains(logs.String(), "func=Classifier") })
	assert.Contains(t, logs.String(), `breaker=replica`)
	assert.Equal(t, 2, r.Pending(), "the keys stay pending")
	assert.Positive(t, b.Stats().Failures, "the panics count as failures")

	replica.Heal()
	wait(t, r, "catch-up once the replica answers")
	assert.Equal(t, map[string]string{"x": "x", "y": "y"}, replica.Snapshot())
}

// TestClassifierPanicReleasesTheProbe: a replicated write whose
// Classifier panics releases its permit as a failure, exactly once, and
// returns the panic as its Cause: a probe re-opens the breaker instead of
// holding the probe slot until its timer.
func TestClassifierPanicReleasesTheProbe(t *testing.T) {
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()
	b, err := m.Register("replica", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: time.Hour},
		Classify: panicsOnError,
	})
	require.NoError(t, err)
	replica := replicatetest.NewReplica()
	replica.Fail(nil)
	var logs logBuffer
	// No manager and an hour between looks: the writes are the only calls.
	r, err := replicate.New(replicate.NewMemory(), replica, b, replicate.Options{
		WatchInterval: time.Hour, RetryInterval: time.Hour, Logger: logs.logger(),
	})
	require.NoError(t, err)
	defer r.Close()
	ctx := context.Background()

	res, err := r.Put(ctx, "a", []byte("1"))
	require.NoError(t, err, "the primary write")
	var pe *replicate.PanicError
	require.ErrorAs(t, res.Cause, &pe)
	assert.Equal(t, "Classifier", pe.Func)
	assert.Equal(t, "replica", pe.Breaker)
	m.Sync()
	assert.Equal(t, breaker.Open, b.State(), "the panic counted as the failure that trips Consecutive{1}")
	assert.Equal(t, uint64(1), b.Stats().Failures, "released once")

	mock.Add(time.Second)
	m.Sync()
	require.Equal(t, breaker.HalfOpen, b.State())
	res, err = r.Put(ctx, "b", []byte("2"))
	require.NoError(t, err)
	require.ErrorAs(t, res.Cause, &pe, "the probe's classifier panicked")
	m.Sync()
	assert.Equal(t, breaker.Open, b.State(), "the probe failed: open again, not stuck probing")
	assert.Equal(t, uint64(2), b.Stats().Failures, "each permit released exactly once")
	assert.Equal(t, 2, r.Pending())
	assert.Equal(t, 2, strings.Count(logs.String(), "func=Classifier"), "each panic logged")
}

// panickyReplica panics on every call.
type panickyReplica struct{}

func (panickyReplica) Put(context.Context, string, []byte) error { panic("replica put") }
func (panickyReplica) Delete(context.Context, string) error      { panic("replica delete") }

func TestReplicaPanicIsAFailure(t *testing.T) {
	m := manager.Start(manager.Options{})
	defer m.Stop()
	classified := 0
	b, err := m.Register("replica", manager.Config{
		Strategy: breaker.Consecutive{Failures: 5},
		Classify: func(err error) classify.Outcome { classified++; return classify.Default(err) },
	})
	require.NoError(t, err)
	var logs logBuffer
	r, err := replicate.New(replicate.NewMemory(), panickyReplica{}, b, replicate.Options{RetryInterval: time.Hour, Logger: logs.logger()})
	require.NoError(t, err)
	defer r.Close()
	ctx := context.Background()

	for i, write := range []func() (replicate.Result, error){
		func() (replicate.Result, error) { return r.Put(ctx, "a", []byte("1")) },
		func() (replicate.Result, error) { return r.Delete(ctx, "b") },
	} {
		res, err := write()
		require.NoError(t, err, "write %d: the primary write", i)
		var pe *replicate.PanicError
		require.ErrorAs(t, res.Cause, &pe, "write %d", i)
		assert.Equal(t, []string{"Replica.Put", "Replica.Delete"}[i], pe.Func)
		assert.Contains(t, string(pe.Stack), "panickyReplica", "write %d: the stack is the replica's", i)
	}
	assert.Equal(t, uint64(2), b.Stats().Failures)
	assert.Zero(t, classified, "a replica's panic is a failure, not the classifier's to judge")
	assert.Equal(t, 2, r.Pending())
	assert.True(t, errors.Is(r.Wait(canceled()), context.Canceled))
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestPrimaryNilContext: the memory primary refuses a nil context with an
// error rather than dereferencing it.
func TestPrimaryNilContext(t *testing.T) {
	checkPrimaryNilContext(t, replicate.NewMemory())
}

func checkPrimaryNilContext(t *testing.T, p replicate.Primary) {
	var nilCtx context.Context
	assert.ErrorIs(t, p.Put(nilCtx, "a", []byte("1")), replicate.ErrNilContext, "Put")
	assert.ErrorIs(t, p.Delete(nilCtx, "a"), replicate.ErrNilContext, "Delete")
	_, _, err := p.Get(nilCtx, "a")
	assert.ErrorIs(t, err, replicate.ErrNilContext, "Get")
	_, err = p.Lookup(nilCtx, "a")
	assert.ErrorIs(t, err, replicate.ErrNilContext, "Lookup")
	_, err = p.Confirm(nilCtx, "a", 1)
	assert.ErrorIs(t, err, replicate.ErrNilContext, "Confirm")
	_, err = p.PendingKeys(nilCtx, "", 10)
	assert.ErrorIs(t, err, replicate.ErrNilContext, "PendingKeys")
	assert.Equal(t, 0, p.PendingCount(), "nothing was written")
}

package manager_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	fstep "github.com/fusebox-go/fusebox/internal/fleet"
	"github.com/fusebox-go/fusebox/manager"
)

// maxLag is the longest a process of a fleet waits past the end of
// another's opening, or of a lease, before it turns half-open: every
// manager of a test is half-open maxLag after the open period's end.
const maxLag = fstep.MaxLag

// errBoom is the error of a failing call in these tests.
var errBoom = errors.New("boom")

// quietLogger discards the manager's reports, for tests that do not read them.
var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// startMock starts a manager on a mock clock and stops it when the test ends.
func startMock(t testing.TB) (*manager.Manager, *clock.Mock) {
	t.Helper()
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger})
	t.Cleanup(m.Stop)
	return m, mock
}

// register registers a breaker and fails the test if it cannot.
func register(t testing.TB, m *manager.Manager, name string, cfg manager.Config) *manager.Breaker {
	t.Helper()
	b, err := m.Register(name, cfg)
	require.NoError(t, err, "Register(%q)", name)
	require.NotNil(t, b)
	return b
}

// advance moves the mock clock by d and waits for the manager to handle
// every timer that is due.
func advance(m *manager.Manager, mock *clock.Mock, d time.Duration) {
	mock.Add(d)
	m.Sync()
}

// release makes one call through b that ends with err.
func release(t testing.TB, b *manager.Breaker, err error) {
	t.Helper()
	p, aerr := b.Acquire(context.Background())
	require.NoError(t, aerr, "Acquire on %q in %v", b.Name(), b.State())
	require.False(t, p.Probe(), "Acquire on %q unexpectedly got the probe", b.Name())
	p.Release(err)
}

// fail makes n failing calls through a closed breaker.
func fail(t testing.TB, b *manager.Breaker, n int) {
	t.Helper()
	for range n {
		release(t, b, errBoom)
	}
}

// probe takes the probe's permit of a half-open breaker.
func probe(t testing.TB, b *manager.Breaker) manager.Permit {
	t.Helper()
	require.Equal(t, breaker.HalfOpen, b.State(), "breaker %q before the probe", b.Name())
	p, err := b.Acquire(context.Background())
	require.NoError(t, err, "probe Acquire on %q", b.Name())
	require.True(t, p.Probe(), "first Acquire in half_open on %q must be the probe", b.Name())
	return p
}

// declined asserts that Acquire is declined and returns the *OpenError.
func declined(t testing.TB, b *manager.Breaker) *breaker.OpenError {
	t.Helper()
	p, err := b.Acquire(context.Background())
	require.Error(t, err, "Acquire on %q in %v must be declined", b.Name(), b.State())
	require.Equal(t, manager.Permit{}, p)
	require.ErrorIs(t, err, breaker.ErrOpen)
	var oe *breaker.OpenError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, b.Name(), oe.Name)
	return oe
}

// requireState checks the state of b and names the step in the message.
func requireState(t testing.TB, b *manager.Breaker, want breaker.State, step string) {
	t.Helper()
	require.Equal(t, want, b.State(), "breaker %q %s", b.Name(), step)
}

// drain returns the events already waiting in ch, without blocking.
func drain(ch <-chan manager.Event) []manager.Event {
	var evs []manager.Event
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return evs
			}
			evs = append(evs, ev)
		default:
			return evs
		}
	}
}

// ev is an Event without its generation, for comparisons.
type ev struct {
	Name    string
	From    breaker.State
	To      breaker.State
	Outcome classify.Outcome
	Cause   breaker.Cause
	At      time.Duration // since the start of the test's clock
}

func evsOf(events []manager.Event, t0 time.Time) []ev {
	out := make([]ev, 0, len(events))
	for _, e := range events {
		out = append(out, ev{e.Name, e.Transition.From, e.Transition.To, e.Outcome, e.Cause, e.At.Sub(t0)})
	}
	return out
}

// logBuffer is an io.Writer for a slog.JSONHandler that tests can read
// while the manager writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// records returns every log record written so far.
func (l *logBuffer) records(t testing.TB) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var recs []map[string]any
	dec := json.NewDecoder(bytes.NewReader(l.buf.Bytes()))
	for dec.More() {
		var r map[string]any
		require.NoError(t, dec.Decode(&r))
		recs = append(recs, r)
	}
	return recs
}

// find returns the records whose message is msg.
func (l *logBuffer) find(t testing.TB, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range l.records(t) {
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// requireClosed checks that ch is closed once the events already in it are
// read, without waiting.
func requireClosed(t *testing.T, ch <-chan manager.Event, what string) {
	t.Helper()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		default:
			t.Fatalf("%s: the channel is not closed", what)
		}
	}
}

// waitLimit bounds every wait of a test on something it cannot Sync: a
// goroutine of the test, a store call the test holds, a manager on the
// real clock. Reached only when the test fails.
const waitLimit = 10 * time.Second

// received waits until ch is closed or receives, failing the test after
// waitLimit.
func received(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("still waiting after %v for %s", waitLimit, what)
	}
}

// within runs f and fails the test if it has not returned after
// waitLimit: f must not wait for the manager.
func within(t testing.TB, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	received(t, done, what+" to return")
}

// eventually polls cond, with short pauses, until it holds, failing the
// test after waitLimit. It is for what a test cannot Sync: a goroutine of
// the test (a trial call, a load of callers), the watch's goroutine
// between subscriptions, a manager on the real clock. What a manager on
// the mock clock does, Sync waits for.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so within %v", what, waitLimit)
		}
		time.Sleep(time.Millisecond)
	}
}

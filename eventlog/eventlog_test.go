package eventlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/eventlog"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var errDown = errors.New("upstream down")

// logBuffer is a buffer a slog handler writes to from the Logger's
// goroutine while the test reads it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records decodes the JSON records written so far.
func (b *logBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &r), "record %q", line)
		out = append(out, r)
	}
	return out
}

// jsonLogger returns a logger writing JSON records without their own time
// (the transition's time is in the "at" attribute) to a logBuffer.
func jsonLogger(h func(slog.Handler) slog.Handler) (*slog.Logger, *logBuffer) {
	buf := &logBuffer{}
	var handler slog.Handler = slog.NewJSONHandler(buf, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})
	if h != nil {
		handler = h(handler)
	}
	return slog.New(handler), buf
}

func newManager(t *testing.T) (*manager.Manager, *clock.Mock) {
	t.Helper()
	mock := clock.NewMock()
	mock.Set(t0)
	m := manager.Start(manager.Options{Clock: mock})
	t.Cleanup(m.Stop)
	return m, mock
}

func register(t *testing.T, m *manager.Manager, name string) *manager.Breaker {
	t.Helper()
	b, err := m.Register(name, manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: 10 * time.Second},
	})
	require.NoError(t, err)
	return b
}

// call makes one call through b that ends with err, and requires that it
// was let through.
func call(t *testing.T, b *manager.Breaker, err error) {
	t.Helper()
	p, aerr := b.Acquire(context.Background())
	require.NoError(t, aerr, "breaker %s lets the call through", b.Name())
	p.Release(err)
}

// transition is the part of a record the tests compare.
type transition struct {
	Level, Msg, Breaker, From, To, Outcome, Cause, At, Err string
	Dropped                                                float64
}

func transitions(t *testing.T, buf *logBuffer) []transition {
	t.Helper()
	var out []transition
	for _, r := range buf.records(t) {
		s := func(k string) string { v, _ := r[k].(string); return v }
		d, _ := r["dropped"].(float64)
		out = append(out, transition{
			Level: s("level"), Msg: s("msg"), Breaker: s("breaker"), From: s("from"), To: s("to"),
			Outcome: s("outcome"), Cause: s("cause"), At: s("at"), Err: s("err"), Dropped: d,
		})
	}
	return out
}

func at(d time.Duration) string { return t0.Add(d).Format(time.RFC3339Nano) }

func TestOneRecordPerTransition(t *testing.T) {
	m, mock := newManager(t)
	logger, buf := jsonLogger(nil)
	l, err := eventlog.Start(m, eventlog.Options{Logger: logger})
	require.NoError(t, err)
	b := register(t, m, "payments")

	call(t, b, errDown) // trips
	mock.Add(10 * time.Second)
	m.Sync()
	call(t, b, nil) // the probe succeeds
	m.Sync()
	l.Close()

	const msg = eventlog.TransitionMessage
	assert.Equal(t, []transition{
		{Level: "WARN", Msg: msg, Breaker: "payments", From: "closed", To: "open", Outcome: "failure", Cause: "trip", At: at(0), Err: "upstream down"},
		{Level: "INFO", Msg: msg, Breaker: "payments", From: "open", To: "half_open", Outcome: "none", Cause: "timer", At: at(10 * time.Second)},
		{Level: "INFO", Msg: msg, Breaker: "payments", From: "half_open", To: "probing", Outcome: "none", Cause: "probe", At: at(10 * time.Second)},
		{Level: "INFO", Msg: msg, Breaker: "payments", From: "probing", To: "closed", Outcome: "success", Cause: "probe", At: at(10 * time.Second)},
	}, transitions(t, buf))
	assert.Zero(t, l.Dropped())
}

// In a fleet, the line of every other process says who opened the breaker
// and why.
func TestSharedOpeningSaysWhoAndWhy(t *testing.T) {
	mock := clock.NewMock()
	mock.Set(t0)
	mem := store.NewMemory(mock)
	var ms []*manager.Manager
	var bs []*manager.Breaker
	for _, name := range []string{"web-7", "web-8"} {
		m := manager.Start(manager.Options{Clock: mock, Name: name, Resync: time.Hour})
		t.Cleanup(m.Stop)
		b, err := m.Register("payments", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Store: mem})
		require.NoError(t, err)
		ms, bs = append(ms, m), append(bs, b)
	}
	logger, buf := jsonLogger(nil)
	l, err := eventlog.Start(ms[1], eventlog.Options{Logger: logger})
	require.NoError(t, err)
	call(t, bs[0], errDown)
	for range 2 {
		ms[0].Sync()
		ms[1].Sync()
	}
	l.Close()
	assert.Equal(t, []transition{
		{Level: "WARN", Msg: eventlog.TransitionMessage, Breaker: "payments", From: "closed", To: "open", Outcome: "none", Cause: "shared", At: at(0), Err: "opened by web-7: upstream down"},
	}, transitions(t, buf))
}

func TestCustomLevel(t *testing.T) {
	m, _ := newManager(t)
	logger, buf := jsonLogger(nil)
	l, err := eventlog.Start(m, eventlog.Options{
		Logger: logger,
		Level:  func(manager.Event) slog.Level { return slog.LevelDebug },
	})
	require.NoError(t, err)
	require.NoError(t, register(t, m, "search").ForceOpen())
	m.Sync()
	l.Close()

	got := transitions(t, buf)
	require.Len(t, got, 1)
	assert.Equal(t, "DEBUG", got[0].Level)
	assert.Equal(t, "force_open", got[0].Cause)
}

// gate is a handler whose first record blocks until release is closed, so
// that a test can make the Logger fall behind.
type gate struct {
	slog.Handler
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *gate) Handle(ctx context.Context, r slog.Record) error {
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
	return g.Handler.Handle(ctx, r)
}

func TestReportsDroppedEvents(t *testing.T) {
	m, mock := newManager(t)
	g := &gate{entered: make(chan struct{}), release: make(chan struct{})}
	logger, buf := jsonLogger(func(h slog.Handler) slog.Handler { g.Handler = h; return g })
	l, err := eventlog.Start(m, eventlog.Options{Logger: logger, Buffer: 1})
	require.NoError(t, err)
	b := register(t, m, "inventory") // after Start: the Logger has no baseline for it

	call(t, b, errDown) // closed->open: taken by the Logger, which then blocks
	m.Sync()
	<-g.entered
	mock.Add(10 * time.Second) // open->half_open: waits in the buffer
	m.Sync()
	call(t, b, errDown) // half_open->probing and probing->open: dropped
	m.Sync()

	close(g.release)
	// Once the Logger has written the waiting event, the buffer is empty
	// again and the next event gets through.
	waitFor(t, func() bool { return len(buf.records(t)) == 2 }, "the Logger catches up")
	mock.Add(10 * time.Second) // open->half_open
	m.Sync()
	l.Close()

	const msg = eventlog.TransitionMessage
	assert.Equal(t, []transition{
		{Level: "WARN", Msg: msg, Breaker: "inventory", From: "closed", To: "open", Outcome: "failure", Cause: "trip", At: at(0), Err: "upstream down"},
		{Level: "INFO", Msg: msg, Breaker: "inventory", From: "open", To: "half_open", Outcome: "none", Cause: "timer", At: at(10 * time.Second)},
		{Level: "WARN", Msg: eventlog.DroppedMessage, Breaker: "inventory", Dropped: 2},
		{Level: "INFO", Msg: msg, Breaker: "inventory", From: "open", To: "half_open", Outcome: "none", Cause: "timer", At: at(20 * time.Second)},
	}, transitions(t, buf))
	assert.Equal(t, uint64(2), l.Dropped())
	assert.Equal(t, uint64(2), b.Stats().DroppedEvents, "the manager counted the same drops")
}

func TestNoFalseDropsForBreakersWithHistory(t *testing.T) {
	m, mock := newManager(t)
	b := register(t, m, "ledger")
	call(t, b, errDown) // a transition before the Logger starts
	m.Sync()

	logger, buf := jsonLogger(nil)
	l, err := eventlog.Start(m, eventlog.Options{Logger: logger})
	require.NoError(t, err)
	mock.Add(10 * time.Second)
	m.Sync()
	l.Close()

	got := transitions(t, buf)
	require.Len(t, got, 1, "only the transition after Start, and no drop report")
	assert.Equal(t, "half_open", got[0].To)
	assert.Zero(t, l.Dropped())
}

func TestCloseAndStop(t *testing.T) {
	t.Run("close twice", func(t *testing.T) {
		m, _ := newManager(t)
		logger, _ := jsonLogger(nil)
		l, err := eventlog.Start(m, eventlog.Options{Logger: logger})
		require.NoError(t, err)
		l.Close()
		l.Close()
		assertDone(t, l)
	})
	t.Run("manager stops first", func(t *testing.T) {
		m, _ := newManager(t)
		logger, buf := jsonLogger(nil)
		l, err := eventlog.Start(m, eventlog.Options{Logger: logger})
		require.NoError(t, err)
		call(t, register(t, m, "orders"), errDown)
		m.Sync()
		m.Stop()
		assertDone(t, l) // the Logger ends when the manager stops
		l.Close()
		assert.Len(t, transitions(t, buf), 1, "the event sent before Stop is written")
	})
	t.Run("stopped manager", func(t *testing.T) {
		m, _ := newManager(t)
		m.Stop()
		l, err := eventlog.Start(m, eventlog.Options{})
		require.NoError(t, err)
		assertDone(t, l)
		l.Close()
	})
	t.Run("nil manager", func(t *testing.T) {
		_, err := eventlog.Start(nil, eventlog.Options{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "manager is nil")
	})
	t.Run("buffer too large", func(t *testing.T) {
		m, _ := newManager(t)
		_, err := eventlog.Start(m, eventlog.Options{Buffer: math.MaxInt})
		assert.ErrorContains(t, err, "Options.Buffer")
	})
}

func assertDone(t *testing.T, l *eventlog.Logger) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the Logger did not end within 5s")
	}
}

// waitFor polls cond until it holds, for at most five seconds.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

package watch_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"sync"
	"testing"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/watch"
	"github.com/fusebox-go/fusebox/manager"
)

var tripOnFirst = manager.Config{Strategy: breaker.Consecutive{Failures: 1}}

func start(t *testing.T) *manager.Manager {
	t.Helper()
	m := manager.Start(manager.Options{Clock: clock.NewMock(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(m.Stop)
	return m
}

func register(t *testing.T, m *manager.Manager, name string) *manager.Breaker {
	t.Helper()
	b, err := m.Register(name, tripOnFirst)
	require.NoError(t, err, "Register(%q)", name)
	return b
}

// trip opens b, which trips on its first failure.
func trip(t *testing.T, b *manager.Breaker) {
	t.Helper()
	p, err := b.Acquire(context.Background())
	require.NoError(t, err, "Acquire on %q", b.Name())
	p.Release(errors.New("boom"))
}

// log is a handler that keeps every event it is handed.
type log struct {
	mu     sync.Mutex
	events []manager.Event
}

func (l *log) handle(batch []manager.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, batch...)
}

func (l *log) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		out = append(out, e.Name+":"+e.Transition.String())
	}
	return out
}

func startWatch(t *testing.T, m *manager.Manager, buffer int, handle func([]manager.Event)) *watch.Watch {
	t.Helper()
	w, err := watch.Start(m, buffer, handle)
	require.NoError(t, err, "Start with buffer %d", buffer)
	t.Cleanup(w.Close)
	return w
}

// A watch hands over every event in order; after Manager.Sync and
// Watch.Sync the handler has seen everything that happened before.
func TestInOrderAndSync(t *testing.T) {
	m := start(t)
	a, b := register(t, m, "a"), register(t, m, "b")
	var l log
	w := startWatch(t, m, 0, l.handle)
	trip(t, a)
	trip(t, b)
	require.NoError(t, a.Reset())
	m.Sync()
	w.Sync()
	assert.Equal(t, []string{"a:closed->open", "b:closed->open", "a:open->closed"}, l.names())
	assert.Zero(t, w.Dropped())
}

// Events that find a watch's buffer full are counted in the breaker's
// stats, and reported by the Missed of the breaker's next event, when
// Dropped counts them; another watch loses nothing.
func TestDropsReported(t *testing.T) {
	m := start(t)
	b := register(t, m, "b")
	got := make(chan struct{})
	release := make(chan struct{})
	var l log
	first := true
	w := startWatch(t, m, 1, func(batch []manager.Event) {
		if first {
			first = false
			got <- struct{}{}
			<-release
		}
		l.handle(batch)
	})
	var other log
	wo := startWatch(t, m, 16, other.handle)

	trip(t, b) // delivered; the handler holds it
	<-got
	require.NoError(t, b.Reset()) // waits in the buffer
	trip(t, b)                    // dropped
	require.NoError(t, b.Reset()) // dropped
	m.Sync()
	assert.Equal(t, uint64(2), b.Stats().DroppedEvents)
	close(release)
	w.Sync()
	assert.Zero(t, w.Dropped(), "before the breaker's next event reports them")
	trip(t, b)
	m.Sync()
	w.Sync()
	wo.Sync()
	assert.Equal(t, uint64(2), w.Dropped(), "reported with the next event")
	assert.Zero(t, wo.Dropped(), "drops of the other watch")

	l.mu.Lock()
	defer l.mu.Unlock()
	require.Len(t, l.events, 3)
	assert.Equal(t, []uint64{0, 0, 2}, []uint64{l.events[0].Missed, l.events[1].Missed, l.events[2].Missed}, "Missed of each event delivered")
	assert.Len(t, other.names(), 5, "the other watch saw every event")
}

// A buffer nobody could allocate is an error, and so is a nil handler;
// MaxBuffer is the largest buffer Subscribe gives.
func TestBounds(t *testing.T) {
	m := start(t)
	_, err := watch.Start(m, math.MaxInt, func([]manager.Event) {})
	assert.ErrorContains(t, err, "above the largest")
	_, err = watch.Start(m, 0, nil)
	assert.ErrorContains(t, err, "handler is nil")

	events, unsubscribe := m.Subscribe(math.MaxInt)
	assert.Equal(t, watch.MaxBuffer, cap(events), "Subscribe's largest buffer")
	unsubscribe()
	w := startWatch(t, m, watch.MaxBuffer, func([]manager.Event) {})
	w.Close()
}

// Close hands over what was delivered before it, and a watch of a stopped
// manager is done at once.
func TestCloseAndStop(t *testing.T) {
	m := start(t)
	b := register(t, m, "b")
	var l log
	w := startWatch(t, m, 0, l.handle)
	trip(t, b)
	m.Sync()
	w.Close()
	w.Close()
	assert.Equal(t, []string{"b:closed->open"}, l.names())
	w.Sync() // returns at once

	m.Stop()
	w2, err := watch.Start(m, 0, l.handle)
	require.NoError(t, err)
	<-w2.Done()
	w2.Close()
}

// A watch of a manager that stops hands over the events delivered before,
// then is done.
func TestManagerStops(t *testing.T) {
	m := start(t)
	b := register(t, m, "b")
	var l log
	w := startWatch(t, m, 0, l.handle)
	trip(t, b)
	m.Sync()
	m.Stop()
	<-w.Done()
	assert.Equal(t, []string{"b:closed->open"}, l.names())
}

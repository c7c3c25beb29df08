package manager_test

import (
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
)

// watchLog is a Watch handler that keeps every event it is handed.
type watchLog struct {
	mu      sync.Mutex
	events  []manager.Event
	batches int
}

func (r *watchLog) handle(batch []manager.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, batch...)
	r.batches++
}

func (r *watchLog) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, e.Name+":"+e.Transition.String())
	}
	return out
}

func watch(t *testing.T, m *manager.Manager, opts manager.WatchOptions, handle func([]manager.Event)) *manager.Watch {
	t.Helper()
	w, err := m.Watch(opts, handle)
	require.NoError(t, err, "Watch(%+v)", opts)
	t.Cleanup(w.Close)
	return w
}

// A watch hands over every event in order; after Manager.Sync and
// Watch.Sync the handler has seen everything that happened before.
func TestWatchInOrderAndSync(t *testing.T) {
	m, _ := startMock(t)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 1}}
	a := register(t, m, "a", cfg)
	b := register(t, m, "b", cfg)
	var r watchLog
	w := watch(t, m, manager.WatchOptions{}, r.handle)
	fail(t, a, 1)
	fail(t, b, 1)
	require.NoError(t, a.Reset())
	m.Sync()
	w.Sync()
	assert.Equal(t, []string{"a:closed->open", "b:closed->open", "a:open->closed"}, r.names())
	assert.Zero(t, w.Dropped())
}

// Names limits a watch to some breakers, including one registered later.
func TestWatchNames(t *testing.T) {
	m, _ := startMock(t)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 1}}
	a := register(t, m, "a", cfg)
	var r watchLog
	w := watch(t, m, manager.WatchOptions{Names: []string{"later", "a"}}, r.handle)
	b := register(t, m, "b", cfg)
	later := register(t, m, "later", cfg)
	fail(t, b, 1)
	fail(t, a, 1)
	fail(t, later, 1)
	m.Sync()
	w.Sync()
	assert.Equal(t, []string{"a:closed->open", "later:closed->open"}, r.names())
}

// Events that find a watch's buffer full are counted in Dropped, in the
// breaker's stats, and in the Missed of the breaker's next event; other
// subscriptions lose nothing.
func TestWatchDropsCountedPerSubscription(t *testing.T) {
	m, _ := startMock(t)
	b := register(t, m, "b", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	got := make(chan struct{})
	release := make(chan struct{})
	var r watchLog
	first := true
	w := watch(t, m, manager.WatchOptions{Buffer: 1}, func(batch []manager.Event) {
		if first {
			first = false
			got <- struct{}{}
			<-release
		}
		r.handle(batch)
	})
	var other watchLog
	wo := watch(t, m, manager.WatchOptions{Buffer: 16}, other.handle)

	fail(t, b, 1) // delivered; the handler holds it
	<-got
	require.NoError(t, b.Reset()) // waits in the buffer
	fail(t, b, 1)                 // dropped
	require.NoError(t, b.Reset()) // dropped
	m.Sync()
	assert.Equal(t, uint64(2), w.Dropped(), "drops of the full watch")
	assert.Zero(t, wo.Dropped(), "drops of the other watch")
	assert.Equal(t, uint64(2), b.Stats().DroppedEvents)
	close(release)
	w.Sync()
	fail(t, b, 1)
	m.Sync()
	w.Sync()
	wo.Sync()

	r.mu.Lock()
	defer r.mu.Unlock()
	require.Len(t, r.events, 3)
	assert.Equal(t, []uint64{0, 0, 2}, []uint64{r.events[0].Missed, r.events[1].Missed, r.events[2].Missed}, "Missed of each event delivered")
	assert.Len(t, other.names(), 5, "the other watch saw every event")
}

// A buffer nobody could allocate is an error from Watch, and Subscribe
// caps it; neither panics, on the caller's goroutine or the manager's.
func TestWatchBufferBounds(t *testing.T) {
	m, _ := startMock(t)
	_, err := m.Watch(manager.WatchOptions{Buffer: math.MaxInt}, func([]manager.Event) {})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "above the largest")
	_, err = m.Watch(manager.WatchOptions{}, nil)
	require.Error(t, err)

	events, unsubscribe := m.Subscribe(math.MaxInt)
	assert.Equal(t, 1<<18, cap(events), "the largest buffer")
	unsubscribe()
	requireClosed(t, events, "after unsubscribe")
	b := register(t, m, "b", manager.Config{})
	assert.Equal(t, breaker.Closed, b.State(), "the manager still serves")
}

// Close hands over what was delivered before it, and a watch of a stopped
// manager is done at once.
func TestWatchCloseAndStop(t *testing.T) {
	m, _ := startMock(t)
	b := register(t, m, "b", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	var r watchLog
	w := watch(t, m, manager.WatchOptions{}, r.handle)
	fail(t, b, 1)
	m.Sync()
	w.Close()
	w.Close()
	assert.Equal(t, []string{"b:closed->open"}, r.names())
	w.Sync() // returns at once

	m.Stop()
	w2, err := m.Watch(manager.WatchOptions{}, r.handle)
	require.NoError(t, err)
	<-w2.Done()
	w2.Close()
}

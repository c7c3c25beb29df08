package keyed_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/keyed"
	"github.com/fusebox-go/fusebox/manager"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newSet(t *testing.T, limit int, idle time.Duration) (*keyed.Set[string], *manager.Manager, *clock.Mock) {
	t.Helper()
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	t.Cleanup(m.Stop)
	s := keyed.New(m, limit, idle, func(key string) (*manager.Breaker, bool, string, error) {
		b, err := m.Register(key, manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
		return b, true, "extra of " + key, err
	})
	return s, m, mock
}

// call makes one call through key's breaker, released with err.
func call(t *testing.T, s *keyed.Set[string], key string, err error) *keyed.Entry[string] {
	t.Helper()
	e, p, aerr := s.Acquire(context.Background(), key)
	require.NoError(t, aerr, "Acquire(%q)", key)
	p.Release(err)
	return e
}

func TestEntryCarriesTheRegistration(t *testing.T) {
	s, m, _ := newSet(t, 0, 0)
	e := call(t, s, "a", nil)
	b, _ := m.Breaker("a")
	assert.Same(t, b, e.Breaker)
	assert.True(t, e.Owned)
	assert.Equal(t, "extra of a", e.Extra)
	assert.Same(t, e, call(t, s, "a", nil), "the second call finds the same entry")
}

// The cap removes the least recently used breakers, closed ones first: an
// open breaker outlives closed ones used after it.
func TestCapKeepsOpenBreakersLast(t *testing.T) {
	s, m, mock := newSet(t, 16, -1)
	call(t, s, "open", fmt.Errorf("down"))
	for n := range 100 {
		mock.Add(time.Second)
		call(t, s, fmt.Sprint("closed-", n), nil)
	}
	m.Sync()
	assert.LessOrEqual(t, len(m.Breakers()), 16)
	_, ok := m.Breaker("open")
	assert.True(t, ok, "the open breaker is kept")
	_, ok = m.Breaker("closed-99")
	assert.True(t, ok, "the latest closed breaker is kept")
}

// An idle breaker goes at a sweep done by a later call; a removed key gets
// a fresh breaker.
func TestIdleBreakersGo(t *testing.T) {
	s, m, mock := newSet(t, -1, time.Minute)
	old := call(t, s, "idle", nil)
	mock.Add(2 * time.Minute)
	call(t, s, "other", nil)
	_, ok := m.Breaker("idle")
	assert.False(t, ok, "removed after its idle time")
	assert.NotSame(t, old, call(t, s, "idle", nil), "a fresh entry")
}

// A breaker removed by hand is forgotten, and the call goes through a new
// one.
func TestRemovedByHand(t *testing.T) {
	s, m, _ := newSet(t, 0, 0)
	old := call(t, s, "a", nil)
	require.True(t, m.Remove("a"))
	e := call(t, s, "a", nil)
	assert.NotSame(t, old.Breaker, e.Breaker)
}

package manager_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

// refusing is a real store that refuses the failures of one breaker, as a
// Redis Cluster refuses a script whose keys hash to different slots.
type refusing struct {
	store.Store
	name string
}

var errRefused = errors.New("refused by the test")

func (r *refusing) RecordFailure(ctx context.Context, name string, p store.Policy, failures int64, n []int64) (store.Verdict, error) {
	if name == r.name {
		return store.Verdict{}, errRefused
	}
	return r.Store.RecordFailure(ctx, name, p, failures, n)
}

// One breaker's store error switches that breaker to its fallback, and no
// other breaker of the same store.
func TestSharedStoreErrorIsTheBreakersOwn(t *testing.T) {
	mock := clock.NewMock()
	st := &refusing{Store: store.NewMemory(mock), name: "bad"}
	m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger})
	t.Cleanup(m.Stop)
	events, cancel := m.Subscribe(64)
	defer cancel()
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 2}, Store: st, Recover: recover.BasicTimeout{Open: time.Minute}}
	bad := register(t, m, "bad", cfg)
	good := register(t, m, "good", cfg)

	fail(t, bad, 1)
	m.Sync()
	// (bad's fallback ends with the next status the store answers, which
	// may come at any time: only its events tell that it fell back.)
	assert.Equal(t, uint64(1), bad.Stats().StoreErrors)
	assert.False(t, good.Stats().StoreDown, "another breaker of the same store does not")
	assert.Zero(t, good.Stats().StoreErrors)
	fail(t, good, 2)
	require.Equal(t, breaker.Open, good.State())
	m.Sync()
	s, err := st.Status(context.Background(), []string{"good"})
	require.NoError(t, err)
	require.Positive(t, s[0].Open, "the healthy breaker's opening reached the store")

	var kinds []manager.EventKind
	for _, e := range drain(events) {
		switch {
		case e.Name == "bad":
			kinds = append(kinds, e.Kind)
			assert.Zero(t, e.Transition, "a store event is not a transition")
		case e.Kind != manager.EventTransition:
			t.Errorf("good: a %v event; only bad's store call failed", e.Kind)
		}
	}
	require.NotEmpty(t, kinds, "bad's events")
	assert.Equal(t, manager.EventStoreLost, kinds[0], "bad's first event")
}

// StoreDown reads true only once the fallback is in effect: a FailClosed
// breaker whose Stats say the store is down declines calls.
func TestSharedStoreDownOnlyOnceTheFallbackApplies(t *testing.T) {
	mock := clock.NewMock()
	st := &watched{Store: store.NewMemory(mock)}
	m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger})
	t.Cleanup(m.Stop)
	b := register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 100}, Store: st, Fallback: store.FailClosed})
	st.cut.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !b.Stats().StoreDown {
			p, err := b.Acquire(context.Background())
			if err == nil {
				p.Release(errBoom)
			}
		}
		_, err := b.Acquire(context.Background())
		assert.ErrorIs(t, err, breaker.ErrOpen, "StoreDown read true before FailClosed declined calls")
	}()
	<-done
}

// Events of a shared breaker losing or regaining its store say the state
// the breaker is in, with its generation: they come in the order of the
// breaker's transitions. Here the store is lost, as a resync finds, while a
// caller of breaker x, which has just taken x's probe, waits for the
// store's probe lease. (y's failed call alone would not take x down: one
// breaker's store error is that breaker's problem.)
func TestFaultSharedStoreEventsInOrder(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	hs := newHeldStore(mem)
	m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, StoreTimeout: time.Hour, Resync: time.Hour})
	t.Cleanup(m.Stop)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: time.Second}, Store: hs}
	x := register(t, m, "x", cfg)
	y := register(t, m, "y", cfg)
	events, unsubscribe := m.Subscribe(1024)
	defer unsubscribe()

	fail(t, x, 1)
	m.Sync()
	st, err := mem.Status(context.Background(), []string{"x"})
	require.NoError(t, err)
	require.Positive(t, st[0].Open, "x's opening in the store")
	advance(m, mock, time.Second)
	requireState(t, x, breaker.HalfOpen, "after its open period")
	hs.holdProbe.Store(true)
	acquired := make(chan struct{})
	go func() {
		defer close(acquired)
		if p, err := x.Acquire(context.Background()); err == nil {
			p.Release(nil)
		}
	}()
	received(t, hs.probing, "x's probe to ask for the lease")
	hs.cut.Store(true)
	p, err := y.Acquire(context.Background())
	require.NoError(t, err)
	p.Release(errBoom)          // y's store call fails: y falls back
	advance(m, mock, time.Hour) // the resync fails: the whole store is lost
	got := drain(events)
	require.True(t, slices.ContainsFunc(got, func(e manager.Event) bool { return e.Name == "x" && e.Kind == manager.EventStoreLost }),
		"x's store_lost event after the failed resync: %v", got)
	close(hs.letProbe)
	received(t, acquired, "x's probe call")
	m.Sync()
	got = append(got, drain(events)...)

	paths := newPathChecker()
	for _, e := range got {
		if e.Name == "x" {
			assert.NoError(t, paths.feed(e))
		}
	}
}

// A store-link event prints as its kind, not as the zero transition it
// carries ("state(0)->state(0)"); a transition prints as the change and
// its cause.
func TestEventsPrintWhatTheyReport(t *testing.T) {
	mock := clock.NewMock()
	st := &refusing{Store: store.NewMemory(mock), name: "bad"}
	m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger})
	t.Cleanup(m.Stop)
	events, cancel := m.Subscribe(64)
	defer cancel()
	bad := register(t, m, "bad", manager.Config{Strategy: breaker.Consecutive{Failures: 2}, Store: st})
	local := register(t, m, "local", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})

	fail(t, bad, 1)
	fail(t, local, 1)
	m.Sync()
	printed := map[manager.EventKind]string{}
	for _, e := range drain(events) {
		if _, ok := printed[e.Kind]; !ok {
			printed[e.Kind] = fmt.Sprint(e)
		}
	}
	assert.Equal(t, "bad: store_lost", printed[manager.EventStoreLost])
	assert.Equal(t, "local: closed->open (trip)", printed[manager.EventTransition])
	assert.Equal(t, "svc: store_restored, 2 missed before",
		fmt.Sprint(manager.Event{Kind: manager.EventStoreRestored, Name: "svc", Missed: 2}))
}

package manager_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/store"
)

// flakyWatch is a store.Store whose Watch fails at once while failing is
// set, and whose current subscription the test can drop.
type flakyWatch struct {
	store.Store
	failing atomic.Bool
	calls   atomic.Int32
	live    atomic.Int32 // subscriptions in place
	mu      sync.Mutex
	drop    context.CancelFunc
}

func (w *flakyWatch) Watch(ctx context.Context, ready func(), fn func(store.Change)) error {
	w.calls.Add(1)
	if w.failing.Load() {
		return errCut
	}
	sub, cancel := context.WithCancel(ctx)
	defer cancel()
	w.mu.Lock()
	w.drop = cancel
	w.mu.Unlock()
	err := w.Store.Watch(sub, func() { w.live.Add(1); ready() }, fn)
	w.live.Add(-1)
	if ctx.Err() == nil {
		return errors.New("connection lost")
	}
	return err
}

func (w *flakyWatch) dropSubscription() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drop()
}

// stepUntil advances the mock clock in steps until cond holds, and
// reports whether it did within limit of mock time. It is for the watch's
// goroutine, whose pause between subscriptions runs on the mock clock and
// which Sync does not wait for (see eventually); each step of the mock
// clock yields a real millisecond to it.
func stepUntil(mock *clock.Mock, step, limit time.Duration, cond func() bool) bool {
	for moved := time.Duration(0); moved <= limit; moved += step {
		if cond() {
			return true
		}
		mock.Add(step)
	}
	return cond()
}

// The watch of a store that failed several times in a row waits longer
// and longer before it subscribes again; once a subscription has worked,
// the next failure must start again from the shortest pause, or every
// later outage leaves the manager deaf to the fleet's changes for the
// longest pause (5s), whatever its resync period.
func TestFaultSharedWatchPauseStartsAgain(t *testing.T) {
	mock := clock.NewMock()
	w := &flakyWatch{Store: store.NewMemory(mock)}
	m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, StoreTimeout: time.Hour, Resync: time.Hour})
	t.Cleanup(m.Stop)
	register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 2}, Store: w})
	m.Sync() // the first subscription is a store call Sync waits for
	require.Equal(t, int32(1), w.live.Load(), "the first subscription")

	// Seven failures in a row: the pause grows to its longest.
	w.failing.Store(true)
	w.dropSubscription()
	require.True(t, stepUntil(mock, 10*time.Millisecond, 20*time.Second, func() bool { return w.calls.Load() >= 8 }),
		"seven failed subscriptions within 20s")
	w.failing.Store(false)
	require.True(t, stepUntil(mock, 10*time.Millisecond, 20*time.Second, func() bool { return w.live.Load() == 1 }),
		"subscribed again once the store answers")

	// One more failure after a subscription that worked.
	calls := w.calls.Load()
	w.dropSubscription()
	// The end of a subscription, and the next one after the pause, happen
	// on the watch's goroutine, which Sync does not wait for: a
	// subscription is not a store call in flight once it worked, and its
	// failure is not counted until the loop has it.
	eventually(t, "the watch to fail", func() bool { return w.live.Load() == 0 })
	assert.True(t, stepUntil(mock, 10*time.Millisecond, 500*time.Millisecond, func() bool { return w.calls.Load() > calls }),
		"the watch subscribes again within 500ms after a failure that follows a working subscription")
}

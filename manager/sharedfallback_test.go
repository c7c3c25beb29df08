package manager_test

import (
	"context"
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

// cutPair is two managers on one mock clock sharing "svc" through one
// memory store, the second (B) through a heldStore the test can cut. The
// resync runs every second.
func cutPair(t *testing.T, cfg manager.Config) (*clock.Mock, *store.Memory, []*manager.Manager, [2]*manager.Breaker, *heldStore) {
	t.Helper()
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	cut := newHeldStore(mem)
	var ms []*manager.Manager
	var bs [2]*manager.Breaker
	for i, st := range []store.Store{mem, cut} {
		m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, StoreTimeout: time.Hour, Resync: time.Second})
		t.Cleanup(m.Stop)
		c := cfg
		c.Store = st
		ms = append(ms, m)
		bs[i] = register(t, m, "svc", c)
	}
	syncAll(ms)
	return mock, mem, ms, bs, cut
}

// A forces the fleet open and B follows; B is cut off from the store
// until it says StoreDown; A resets the fleet; B's link comes back: B
// follows the reset, and does not force the fleet again, whatever its
// fallback (it was forced by following, not by hand).
func TestSharedResetNotUndoneByAReplicaCutOff(t *testing.T) {
	for _, fb := range []store.Fallback{store.FallbackLocal, store.FailOpen, store.FailClosed} {
		t.Run(fallbackName(fb), func(t *testing.T) {
			mock, mem, ms, bs, cut := cutPair(t, manager.Config{
				Strategy: breaker.Consecutive{Failures: 3},
				Recover:  recover.BasicTimeout{Open: time.Second},
				Fallback: fb,
			})
			a, b := bs[0], bs[1]
			require.NoError(t, a.ForceOpen())
			syncAll(ms)
			require.True(t, b.Snapshot().Forced, "B follows A's forcing")

			cut.cut.Store(true)
			advance(ms[1], mock, time.Second) // B's sweep fails
			syncAll(ms)
			require.True(t, b.Stats().StoreDown, "B is cut off")
			require.NoError(t, a.Reset())
			syncAll(ms)

			cut.cut.Store(false)
			for range 5 {
				advance(ms[1], mock, time.Second)
				syncAll(ms)
			}
			st := sharedStatus(t, mem)
			assert.False(t, st.Forced, "the fleet stays reset: %+v", st)
			assert.False(t, st.Opened(), "the fleet stays closed: %+v", st)
			assert.False(t, b.Stats().StoreDown, "B is back")
			assert.Equal(t, breaker.Closed, b.State(), "B follows the reset")
			assert.False(t, b.Snapshot().Forced)
			assert.Equal(t, breaker.Closed, a.State(), "A stays closed")
		})
	}
}

func fallbackName(fb store.Fallback) string {
	return map[store.Fallback]string{store.FallbackLocal: "local", store.FailOpen: "fail_open", store.FailClosed: "fail_closed"}[fb]
}

// A FailClosed breaker whose caller wins the local probe while the store
// is cut off is declined: the lease's call fails, the breaker falls back,
// and nothing but the store's answer (or a Reset) lets a call through.
// Its period's timers run out meanwhile without starting a local cycle.
func TestSharedFailClosedAdmitsNoCallWhileDown(t *testing.T) {
	mock, _, ms, bs, cut := cutPair(t, manager.Config{
		Strategy: breaker.Consecutive{Failures: 3},
		Recover:  recover.BasicTimeout{Open: 20 * time.Millisecond, ProbeTimeout: 500 * time.Millisecond},
		Fallback: store.FailClosed,
	})
	a, b := bs[0], bs[1]
	fail(t, a, 3)
	syncAll(ms)
	require.Equal(t, breaker.Open, b.State(), "B follows the fleet's opening")
	advance(ms[1], mock, 20*time.Millisecond+maxLag)
	syncAll(ms)
	require.Equal(t, breaker.HalfOpen, b.State(), "B's lag after the fleet's period")

	cut.cut.Store(true)
	admitted := 0
	for i := range 50 {
		p, err := b.Acquire(context.Background())
		down := b.Stats().StoreDown
		if err == nil {
			if down {
				admitted++
			}
			p.Release(errBoom)
		}
		if i > 0 {
			require.True(t, down, "call %d: the store is cut off", i)
		}
		advance(ms[1], mock, 25*time.Millisecond)
	}
	assert.Zero(t, admitted, "calls admitted while StoreDown")
	assert.Equal(t, breaker.Open, b.State(), "held open until the store answers")
}

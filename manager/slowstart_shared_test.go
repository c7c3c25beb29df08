package manager_test

import (
	"context"
	"fmt"
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

// TestSlowStartSharedFleet is the acceptance for a shared breaker:
// three managers sharing a breaker with SlowStart 10s through a store, on
// the mock clock, each admit 50 % ± 7 % of 4,000 calls 5s into the fleet's
// slow start, whichever probed, and all of them after 10s.
func TestSlowStartSharedFleet(t *testing.T) {
	for prober := range 3 {
		t.Run(fmt.Sprintf("manager %d probes", prober), func(t *testing.T) {
			mock := clock.NewMock()
			ms, bs := fleet(t, 3, mock, store.NewMemory(mock), slowStartConfig(10*time.Second))
			fail(t, bs[(prober+1)%3], 5) // another manager trips it
			syncAll(ms)
			require.True(t, allIn(bs, breaker.Open)(), "every manager is open")
			mock.Add(time.Second + maxLag)
			syncAll(ms)
			require.True(t, allIn(bs, breaker.HalfOpen)(), "every manager is half-open")
			probe(t, bs[prober]).Release(nil)
			syncAll(ms)
			require.True(t, allIn(bs, breaker.Closed)(), "every manager closed with the probe")
			closedAt := mock.Now()
			until := closedAt.Add(10 * time.Second)
			for i, b := range bs {
				st := b.Stats()
				assert.Equal(t, 0.0, st.Admitted, "manager %d at the closing", i)
				assert.Equal(t, until, st.SlowStartUntil, "manager %d: the fleet's slow start ends 10s after the closing", i)
			}

			mock.Add(5 * time.Second)
			syncAll(ms)
			for i, b := range bs {
				assert.InDelta(t, 0.5, b.Stats().Admitted, 1e-9, "manager %d 5s in", i)
				in := admitted(t, b, 4000, nil, until)
				assert.InDelta(t, 0.5, float64(in)/4000, 0.07, "manager %d 5s into the fleet's slow start: %d of 4,000 calls", i, in)
			}
			mock.Add(5 * time.Second)
			syncAll(ms)
			for i, b := range bs {
				assert.Equal(t, 4000, admitted(t, b, 4000, nil, time.Time{}), "manager %d after the slow start", i)
			}
		})
	}
}

// noClosedChanges is a store whose watch misses every Closed change, as a
// watch whose connection dropped misses them: its manager learns of a
// closing from a status read.
type noClosedChanges struct{ store.Store }

func (s noClosedChanges) Watch(ctx context.Context, ready func(), fn func(store.Change)) error {
	return s.Store.Watch(ctx, ready, func(c store.Change) {
		if c.Kind != store.Closed {
			fn(c)
		}
	})
}

// TestSlowStartSharedLateJoiner: a manager whose watch missed the closing
// learns of it from a status read up to 4s late, and joins the fleet's
// slow start where it stands: 40 % admitted 4s in, the same end.
func TestSlowStartSharedLateJoiner(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	ms, bs := fleet(t, 1, mock, mem, slowStartConfig(10*time.Second))
	late := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, Resync: 4 * time.Second})
	t.Cleanup(late.Stop)
	cfg := slowStartConfig(10 * time.Second)
	cfg.Store = noClosedChanges{mem}
	lb := register(t, late, "svc", cfg)
	ms, bs = append(ms, late), append(bs, lb)
	syncAll(ms)

	fail(t, bs[0], 5)
	syncAll(ms)
	mock.Add(time.Second + maxLag)
	syncAll(ms)
	require.True(t, allIn(bs, breaker.HalfOpen)(), "every manager is half-open")
	probe(t, bs[0]).Release(nil)
	syncAll(ms)
	closedAt := mock.Now()
	require.Equal(t, breaker.Probing, lb.State(), "the late manager heard of the lease, and missed the closing")

	mock.Add(4 * time.Second)
	syncAll(ms)
	st := lb.Stats()
	require.Equal(t, breaker.Closed, st.State, "a status read told the late manager")
	assert.InDelta(t, 0.4, st.Admitted, 1e-9, "the late manager joins the slow start where it stands")
	assert.Equal(t, closedAt.Add(10*time.Second), st.SlowStartUntil)
	in := admitted(t, lb, 4000, nil, closedAt.Add(10*time.Second))
	assert.InDelta(t, 0.4, float64(in)/4000, 0.07, "%d of 4,000 calls", in)
}

// A Reset of a shared breaker closes every manager at full rate.
func TestSlowStartSharedReset(t *testing.T) {
	mock := clock.NewMock()
	ms, bs := fleet(t, 2, mock, store.NewMemory(mock), manager.Config{
		Strategy:  breaker.Consecutive{Failures: 1},
		Recover:   recover.BasicTimeout{Open: time.Second},
		SlowStart: 10 * time.Second,
	})
	fail(t, bs[0], 1)
	syncAll(ms)
	require.NoError(t, bs[1].Reset())
	syncAll(ms)
	for i, b := range bs {
		assert.Equal(t, 1.0, b.Stats().Admitted, "manager %d after a Reset", i)
	}
}

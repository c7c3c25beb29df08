package dashboard_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/dashboard"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// TestSlowStartShown: a breaker in a slow start shows the share it admits
// and when it ends, in the JSON status and in the event stream alike.
func TestSlowStartShown(t *testing.T) {
	f := setup(t, dashboard.Options{Refresh: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := f.m.Register("db", manager.Config{
		Strategy:  breaker.Consecutive{Failures: 1},
		Recover:   recover.BasicTimeout{Open: time.Second},
		SlowStart: 10 * time.Second,
	})
	require.NoError(t, err)
	require.ErrorIs(t, db.Do(ctx, fail), errDown)
	f.mock.Add(time.Second)
	f.m.Sync()
	require.NoError(t, db.Do(ctx, succeed)) // the probe: a recovery
	closedAt := f.mock.Now()
	f.mock.Add(4 * time.Second)
	f.m.Sync()

	st := f.status(t)
	require.Len(t, st.Breakers, 2)
	got := st.Breakers[1]
	assert.Equal(t, "closed", got.State)
	assert.InDelta(t, 0.4, got.Admitted, 1e-9)
	assert.True(t, got.SlowStartUntil.Equal(closedAt.Add(10*time.Second)), "slow_start_until %v", got.SlowStartUntil)
	assert.Equal(t, 1.0, st.Breakers[0].Admitted, "a closed breaker admits every call")
	assert.True(t, st.Breakers[0].SlowStartUntil.IsZero())

	s := openEvents(t, ctx, f)
	wire := s.next(t).Breakers[1]
	assert.InDelta(t, 0.4, wire.Admitted, 1e-9)
	assert.True(t, wire.SlowStartUntil.Equal(closedAt.Add(10*time.Second)), "slow start's end on the wire %v", wire.SlowStartUntil)

	f.mock.Add(6 * time.Second)
	f.m.Sync()
	st = f.status(t)
	assert.Equal(t, 1.0, st.Breakers[1].Admitted)
	assert.True(t, st.Breakers[1].SlowStartUntil.IsZero(), "over")
}

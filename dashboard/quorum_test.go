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
	"github.com/fusebox-go/fusebox/store"
)

// A shared breaker with a quorum shows how many processes the fleet's
// count of failures comes from, and a replica that opened alone says so
// in its timeline.
func TestStatusShowsProcessesOfTheFleetsCount(t *testing.T) {
	f := setup(t, dashboard.Options{})
	mem := store.NewMemory(f.mock)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 2}, Store: mem, Quorum: 2}
	b, err := f.m.Register("inventory", cfg)
	require.NoError(t, err)
	other := manager.Start(manager.Options{Clock: f.mock})
	t.Cleanup(other.Stop)
	_, err = other.Register("inventory", cfg)
	require.NoError(t, err)
	f.m.Sync()
	other.Sync()

	ctx := context.Background()
	require.ErrorIs(t, b.Do(ctx, fail), errDown)
	require.ErrorIs(t, b.Do(ctx, fail), errDown) // opens this replica alone
	f.mock.Add(time.Millisecond)
	f.m.Sync()

	var inv dashboard.BreakerStatus
	for _, s := range f.status(t).Breakers {
		if s.Name == "inventory" {
			inv = s
		}
	}
	require.Equal(t, "inventory", inv.Name)
	assert.Equal(t, "open", inv.State)
	assert.Equal(t, int64(1), inv.Processes, "the fleet's count comes from this process alone")
	require.NotEmpty(t, inv.Transitions)
	assert.Equal(t, "alone", inv.Transitions[len(inv.Transitions)-1].Cause)
}

package dashboard_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/dashboard"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/store"
)

// find returns the status of the breaker name.
func find(t *testing.T, st dashboard.Status, name string) dashboard.BreakerStatus {
	t.Helper()
	for _, b := range st.Breakers {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("no breaker %q in the status", name)
	return dashboard.BreakerStatus{}
}

// A shared breaker another process opened says who and why, in its state
// and in its timeline.
func TestStatusSaysWhoOpenedAndWhy(t *testing.T) {
	f := setup(t, dashboard.Options{})
	mem := store.NewMemory(f.mock)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Store: mem}
	_, err := f.m.Register("inventory", cfg)
	require.NoError(t, err)
	web7 := manager.Start(manager.Options{Clock: f.mock, Name: "web-7"})
	t.Cleanup(web7.Stop)
	other, err := web7.Register("inventory", cfg)
	require.NoError(t, err)
	f.m.Sync()
	web7.Sync()

	require.ErrorIs(t, other.Do(context.Background(), fail), errDown)
	for range 2 {
		web7.Sync()
		f.m.Sync()
	}
	inv := find(t, f.status(t), "inventory")
	assert.Equal(t, "open", inv.State)
	assert.Equal(t, "web-7", inv.OpenedBy)
	assert.Equal(t, "service down", inv.Cause)
	require.NotEmpty(t, inv.Transitions)
	last := inv.Transitions[len(inv.Transitions)-1]
	assert.Equal(t, "shared", last.Cause)
	assert.Equal(t, "opened by web-7: service down", last.Err)
}

// A breaker in a dry run says so, and counts the calls it would have
// declined.
func TestStatusShowsADryRun(t *testing.T) {
	f := setup(t, dashboard.Options{})
	dry, err := f.m.Register("search", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, DryRun: true})
	require.NoError(t, err)
	ctx := context.Background()
	require.ErrorIs(t, dry.Do(ctx, fail), errDown) // trips it
	require.NoError(t, dry.Do(ctx, succeed))       // let through
	f.m.Sync()
	s := find(t, f.status(t), "search")
	assert.Equal(t, "open", s.State)
	assert.True(t, s.DryRun)
	assert.Equal(t, uint64(1), s.WouldDecline)
	assert.Zero(t, s.Declined)
	assert.False(t, find(t, f.status(t), "payments").DryRun)
}

// The event stream carries why a breaker opened, on its record and on
// the transition's.
func TestEventsSayWhy(t *testing.T) {
	f := setup(t, dashboard.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := openEvents(t, ctx, f)
	s.next(t)
	require.ErrorIs(t, f.pay.Do(ctx, fail), errDown)
	require.ErrorIs(t, f.pay.Do(ctx, fail), errDown)
	f.m.Sync()
	var pay dashboard.BreakerStatus
	for pay.State != "open" {
		pay = find(t, s.next(t), "payments")
	}
	assert.Equal(t, "service down", s.why["payments"])
	require.NotEmpty(t, pay.Transitions)
	assert.Equal(t, "service down", pay.Transitions[len(pay.Transitions)-1].Err)
}

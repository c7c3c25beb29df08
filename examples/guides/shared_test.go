package guides_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

// syncAll syncs every manager sharing a memory store, twice in a row: a
// change one manager's loop sends reaches the others during the first
// pass, and they apply it in the second.
func syncAll(ms []*manager.Manager) {
	for range 2 {
		for _, m := range ms {
			m.Sync()
		}
	}
}

var errUnavailable = errors.New("payments unavailable")

// Three managers share "payments" through one memory store: two failures
// through one of them trip it for all three, open until the trip's instant
// plus the opener's Open period (the others, their lag later), with no
// poll.
func TestSharedFleetTrips(t *testing.T) {
	mock := clock.NewMock()
	cfg := manager.Config{
		Strategy: breaker.Consecutive{Failures: 2},
		Recover:  recover.BasicTimeout{Open: time.Minute},
		Store:    store.NewMemory(mock),
	}
	var ms []*manager.Manager
	var bs []*manager.Breaker
	for range 3 {
		m := manager.Start(manager.Options{Clock: mock})
		t.Cleanup(m.Stop)
		b, err := m.Register("payments", cfg)
		require.NoError(t, err)
		ms, bs = append(ms, m), append(bs, b)
	}
	tripped := mock.Now()
	fail := func(context.Context) error { return errUnavailable }

	_ = bs[1].Do(context.Background(), fail)
	_ = bs[1].Do(context.Background(), fail) // trips the fleet
	syncAll(ms)                              // every manager is open until the trip's instant + Open

	end := tripped.Add(time.Minute)
	for i, b := range bs {
		require.Equal(t, breaker.Open, b.State())
		if i == 1 { // the opener
			require.Equal(t, end, b.Snapshot().Until)
		} else { // the others, their lag later
			require.WithinRange(t, b.Snapshot().Until, end.Add(100*time.Millisecond), end.Add(130*time.Millisecond))
		}
	}
}

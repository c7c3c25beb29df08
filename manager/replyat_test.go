package manager_test

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	fstep "github.com/fusebox-go/fusebox/internal/fleet"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

// slowReplies is a store whose failure reports come back late: the script
// runs, then its answer takes late on the mock clock to arrive. Its watch
// delivers nothing, so that its manager learns of the fleet from replies.
type slowReplies struct {
	store.Store
	mock *clock.Mock
	late time.Duration
}

func (s *slowReplies) RecordFailure(ctx context.Context, name string, p store.Policy, failures int64, n []int64) (store.Verdict, error) {
	v, err := s.Store.RecordFailure(ctx, name, p, failures, n)
	s.mock.Add(s.late)
	return v, err
}

func (s *slowReplies) Watch(ctx context.Context, ready func(), _ func(store.Change)) error {
	ready()
	<-ctx.Done()
	return ctx.Err()
}

// A process that learns of another's opening from its own failure report's
// reply counts the open period's rest from the reply's arrival: the store
// counted it from the moment the script ran, before. Counted from the
// moment the report was asked, a reply that waited would end its period
// (and ask for the lease) before the store's, and before the opener's.
func TestSharedReplyDeadlineCountsFromArrival(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: time.Second}}

	m0 := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, Resync: time.Hour, Name: "opener"})
	t.Cleanup(m0.Stop)
	cfg.Store = mem
	b0 := register(t, m0, "svc", cfg)
	m1 := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, Resync: time.Hour, Name: "follower"})
	t.Cleanup(m1.Stop)
	cfg.Store = &slowReplies{Store: mem, mock: mock, late: 200 * time.Millisecond}
	b1 := register(t, m1, "svc", cfg)
	syncAll([]*manager.Manager{m0, m1})

	opened := mock.Now()
	release(t, b0, errBoom)
	syncAll([]*manager.Manager{m0, m1})
	require.Equal(t, breaker.Open, b0.State())
	require.Equal(t, breaker.Closed, b1.State(), "the follower hears nothing of the opening but replies")

	release(t, b1, errBoom) // its reply says open, for 1s from the script's run
	arrived := mock.Now()
	require.Equal(t, 200*time.Millisecond, arrived.Sub(opened))
	m1.Sync()
	require.Equal(t, breaker.Open, b1.State())
	want := arrived.Add(time.Second + fstep.Lag("follower"))
	assert.Equal(t, want, b1.Stats().Until, "the follower's period: from the reply's arrival, and its lag")
	assert.True(t, b1.Stats().Until.After(b0.Stats().Until), "never before the opener's")
}

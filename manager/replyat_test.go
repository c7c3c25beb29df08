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

// slowReplies is a store whose failure reports wait late on the mock clock
// before they run, as a call waits for a connection of a busy pool; its
// watch's gate holds the changes, so that its manager learns of the fleet
// from replies.
type slowReplies struct {
	*gatedWatch
	mock *clock.Mock
	late time.Duration
}

func (s *slowReplies) RecordFailure(ctx context.Context, name string, p store.Policy, failures int64, n []int64) (store.Verdict, error) {
	s.mock.Add(s.late)
	return s.gatedWatch.RecordFailure(ctx, name, p, failures, n)
}

// A process that learns of another's opening from its own failure report's
// reply counts the open period's rest from the reply's arrival: the store
// counted it from the moment the script ran, before. Counted from the
// moment the report was asked, a report that waited before it ran would
// end the process's period (and let it ask for the lease) before the
// store's, and before the opener's.
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
	gate := &gatedWatch{Memory: mem}
	gate.hold()
	cfg.Store = &slowReplies{gatedWatch: gate, mock: mock, late: 200 * time.Millisecond}
	b1 := register(t, m1, "svc", cfg)
	syncAll([]*manager.Manager{m0, m1})

	opened := mock.Now()
	release(t, b0, errBoom)
	syncAll([]*manager.Manager{m0, m1})
	require.Equal(t, breaker.Open, b0.State())
	require.Equal(t, breaker.Closed, b1.State(), "the follower hears nothing of the opening but replies")

	release(t, b1, errBoom) // it ran 200ms late: the reply says open for 800ms more
	arrived := mock.Now()
	require.Equal(t, 200*time.Millisecond, arrived.Sub(opened))
	m1.Sync()
	require.Equal(t, breaker.Open, b1.State())
	storeEnd := opened.Add(time.Second)
	want := storeEnd.Add(fstep.Lag("follower"))
	assert.Equal(t, want, b1.Stats().Until, "the follower's period: the store's, and its lag")
	assert.False(t, b1.Stats().Until.Before(storeEnd), "never before the store's end")
}

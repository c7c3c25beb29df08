package manager_test

import (
	"context"
	"errors"
	"sync/atomic"
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

// openedMeanwhile is a store where another process opens the breaker just
// after this process's failure report was counted, before the report's
// reply comes back: the reply says the threshold is reached in the closed
// epoch, this process trips by its own verdict, and its opening is
// refused, the other's standing.
type openedMeanwhile struct {
	*store.Memory
	once atomic.Bool
}

func (s *openedMeanwhile) RecordFailure(ctx context.Context, name string, p store.Policy, failures int64, n []int64) (store.Verdict, error) {
	v, err := s.Memory.RecordFailure(ctx, name, p, failures, n)
	if err == nil && !s.once.Swap(true) {
		_, _, _ = s.Memory.Open(ctx, name, v.Epoch, time.Second, store.Reason{By: "web-7", Why: "dial tcp: connection refused"})
	}
	return v, err
}

// Every process names the store's opener and its error: a process that
// tripped by its own verdict, and whose opening the store refused since
// another's stood, names that other process for the whole period (Stats,
// the OpenError's Cause). On 19f756c it kept its own name and error:
// the store's reason was never applied on a same-state follow.
func TestSharedNamesTheStoresOpener(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, Resync: time.Hour, Name: "web-1"})
	t.Cleanup(m.Stop)
	b := register(t, m, "svc", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second},
		Store:    &openedMeanwhile{Memory: mem},
	})
	release(t, b, errBoom)
	m.Sync()
	require.Equal(t, breaker.Open, b.State())
	st, err := mem.Status(context.Background(), []string{"svc"})
	require.NoError(t, err)
	require.Equal(t, "web-7", st[0].Reason.By, "the other process's opening stood")

	s := b.Stats()
	assert.Equal(t, "web-7", s.OpenedBy, "Stats.OpenedBy")
	assert.Equal(t, "dial tcp: connection refused", s.Cause, "Stats.Cause")
	_, err = b.Acquire(context.Background())
	var oe *breaker.OpenError
	require.True(t, errors.As(err, &oe), "declined: %v", err)
	var by *breaker.OpenedError
	require.True(t, errors.As(oe.Cause, &by), "the OpenError's Cause: %v", oe.Cause)
	assert.Equal(t, "web-7", by.By)
}

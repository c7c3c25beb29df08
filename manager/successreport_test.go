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

// successFailingStore is a store.Store whose next failSuccess calls of
// RecordSuccess fail.
type successFailingStore struct {
	store.Store
	failSuccess atomic.Int32
	successes   atomic.Int32 // RecordSuccess calls, failed or not
}

var errSuccessReport = errors.New("success report refused by the test")

func (s *successFailingStore) RecordSuccess(ctx context.Context, name string, p store.Policy, n []int64) (store.Verdict, error) {
	s.successes.Add(1)
	if s.failSuccess.Add(-1) >= 0 {
		return store.Verdict{}, errSuccessReport
	}
	return s.Store.RecordSuccess(ctx, name, p, n)
}

// A window's successes reach the store with the resync's report. When that
// report fails, the successes are not lost: they go back to be reported
// again, the failure is counted as a store error, and the fleet's window
// sees the true failure rate.
func TestSharedFailedSuccessReportLosesNoSuccess(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	fs := &successFailingStore{Store: mem}
	m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, StoreTimeout: time.Hour, Resync: 5 * time.Second})
	t.Cleanup(m.Stop)
	b := register(t, m, "svc", manager.Config{
		Strategy: breaker.TimeWindow{Rate: .5, Period: time.Minute, MinCalls: 10},
		Recover:  recover.BasicTimeout{Open: time.Minute},
		Store:    fs,
	})
	m.Sync()

	for range 100 {
		release(t, b, nil)
	}
	m.Sync()
	fs.failSuccess.Store(1)
	advance(m, mock, 5*time.Second) // the resync reports the 100 successes: refused
	require.GreaterOrEqual(t, fs.successes.Load(), int32(1), "the resync reported the successes")
	assert.GreaterOrEqual(t, b.Stats().StoreErrors, uint64(1), "the refused report is a store error")
	advance(m, mock, 5*time.Second) // the store answers again

	for i := range 10 {
		release(t, b, errors.New("boom"))
		m.Sync()
		require.Equal(t, breaker.Closed, b.State(), "failure %d of 110 calls: 9%% failed", i+1)
	}
	advance(m, mock, 5*time.Second)
	st := b.Stats()
	assert.Equal(t, breaker.Closed, st.State)
	assert.False(t, st.StoreDown, "the store answers")
}

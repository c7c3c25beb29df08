package manager_test

import (
	"context"
	"sync"
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

// slowFailures is a store whose RecordFailure waits until the test closes
// proceed, and which records the failures each call carried.
type slowFailures struct {
	store.Store
	entered chan struct{}
	proceed chan struct{}
	mu      sync.Mutex
	counts  []int64
	calls   atomic.Int32
}

func (s *slowFailures) RecordFailure(ctx context.Context, name string, p store.Policy, failures int64, n []int64) (store.Verdict, error) {
	if s.calls.Add(1) == 1 {
		close(s.entered)
	}
	<-s.proceed
	s.mu.Lock()
	s.counts = append(s.counts, failures)
	s.mu.Unlock()
	return s.Store.RecordFailure(ctx, name, p, failures, n)
}

// A process has at most one failure report of a breaker in flight: the
// failures its callers release meanwhile wait, folded into the next
// report, which the caller whose report came back makes, and which trips
// the breaker. 128 failing callers cost two round trips, not 128 queued
// behind the client's connections.
func TestSharedFailuresFoldedIntoOneReport(t *testing.T) {
	mock := clock.NewMock()
	st := &slowFailures{Store: store.NewMemory(mock), entered: make(chan struct{}), proceed: make(chan struct{})}
	t.Cleanup(func() {
		select {
		case <-st.proceed:
		default:
			close(st.proceed) // a failed check: let the callers go
		}
	})
	m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, StoreTimeout: time.Hour, Resync: time.Hour})
	t.Cleanup(m.Stop)
	b := register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 2}, Recover: recover.BasicTimeout{Open: time.Minute}, Store: st})
	m.Sync()

	first := make(chan struct{})
	go func() { defer close(first); release(t, b, errBoom) }()
	received(t, st.entered, "the first failure's report")
	var wg sync.WaitGroup
	var returned atomic.Int32
	for range 127 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := b.Acquire(context.Background())
			if err != nil {
				return
			}
			p.Release(errBoom)
			returned.Add(1)
		}()
	}
	// The 127 fold into the report on its way and wait for its verdict.
	eventually(t, "the 127 released", func() bool { return b.Stats().Failures == 128 })
	assert.Zero(t, returned.Load(), "a folded failure waits for the report that carries it")
	assert.Equal(t, int32(1), st.calls.Load(), "one report in flight")
	close(st.proceed)
	wg.Wait()
	<-first
	m.Sync()
	st.mu.Lock()
	counts := st.counts
	st.mu.Unlock()
	// The first report, then one of the failures folded meanwhile, which
	// trips the breaker: a caller counted in Stats but not folded yet when
	// it tripped finds its permit stale, and reports nothing.
	require.Len(t, counts, 2, "failure reports for 128 failures: %v", counts)
	assert.Equal(t, int64(1), counts[0])
	assert.Equal(t, int64(127), counts[1]+int64(b.Stats().Stale), "every other failure folded, or stale: %v", counts)
	assert.Equal(t, breaker.Open, b.State(), "the folded report trips it")
	assert.Equal(t, int32(127), returned.Load())
}

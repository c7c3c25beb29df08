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

// slowFirstFailure is a store whose first RecordFailure waits until the
// test closes proceed; it counts the success reports.
type slowFirstFailure struct {
	store.Store
	entered, proceed chan struct{}
	calls            atomic.Int32
	successes        atomic.Int32
}

func (s *slowFirstFailure) RecordFailure(ctx context.Context, name string, p store.Policy, failures int64, n []int64) (store.Verdict, error) {
	if s.calls.Add(1) == 1 {
		close(s.entered)
		<-s.proceed
	}
	return s.Store.RecordFailure(ctx, name, p, failures, n)
}

func (s *slowFirstFailure) RecordSuccess(ctx context.Context, name string, p store.Policy, n []int64) (store.Verdict, error) {
	s.successes.Add(1)
	return s.Store.RecordSuccess(ctx, name, p, n)
}

// Counts are exact while a failure report is on its way: a success
// released meanwhile ends the shared run after that report and before the
// failures released after it, so a shared Consecutive breaker trips at the
// call a local one does (defect 13: failure, success, failure opened a
// shared Consecutive{2}, not the local one). Each case plays the outcomes
// on a local breaker and on a shared one whose first report waits.
func TestSharedSuccessDuringAReportEndsTheRun(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int
		after    []bool // the outcomes released while the first failure's report waits: true a failure
		open     bool
	}{
		{"failure, success, failure", 2, []bool{false, true}, false},
		{"failure, failure, success, failure", 3, []bool{true, false, true}, false},
		{"failure, success, failure, failure", 2, []bool{false, true, true}, true},
		{"failure, failure that trips, success", 2, []bool{true, false}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mock := clock.NewMock()
			st := &slowFirstFailure{Store: store.NewMemory(mock), entered: make(chan struct{}), proceed: make(chan struct{})}
			var once sync.Once
			let := func() { once.Do(func() { close(st.proceed) }) }
			t.Cleanup(let)
			m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, StoreTimeout: time.Hour, Resync: time.Hour})
			t.Cleanup(m.Stop)
			cfg := manager.Config{Strategy: breaker.Consecutive{Failures: tc.failures}, Recover: recover.BasicTimeout{Open: time.Minute}}
			local := register(t, m, "local", cfg)
			cfg.Store = st
			shared := register(t, m, "shared", cfg)
			m.Sync()

			release(t, local, errBoom)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); release(t, shared, errBoom) }()
			received(t, st.entered, "the first failure's report")
			failures := uint64(1)
			for _, fail := range tc.after {
				if local.State() == breaker.Closed {
					release(t, local, map[bool]error{true: errBoom, false: nil}[fail])
				}
				if !fail {
					release(t, shared, nil)
					continue
				}
				failures++
				wg.Add(1)
				go func() { defer wg.Done(); release(t, shared, errBoom) }()
				eventually(t, "the failure released", func() bool { return shared.Stats().Failures == failures })
			}
			let()
			wg.Wait()
			m.Sync()
			assert.Equal(t, tc.open, local.State() == breaker.Open, "the local breaker: %v", local.State())
			assert.Equal(t, local.State(), shared.State(), "the shared breaker trips as the local one does")
		})
	}
}

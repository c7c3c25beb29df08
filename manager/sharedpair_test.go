package manager_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

// heldStore is a store.Store with hooks: Resolve and AcquireProbe can be
// held up until let go (as a slow network would), and every call fails
// while cut.
type heldStore struct {
	store.Store
	cut atomic.Bool

	holdResolve  atomic.Bool
	resolving    chan struct{} // closed when a held Resolve begins
	letResolve   chan struct{}
	resolved     chan struct{} // closed when the held Resolve has returned
	holdProbe    atomic.Bool
	probing      chan struct{}
	letProbe     chan struct{}
	statusCalls  atomic.Int32
	statusReturn chan struct{} // receives after each Status call
	holdStatus   atomic.Bool   // the next Status call reads the store, then waits for letStatus
	statusRead   chan struct{}
	letStatus    chan struct{}
}

func newHeldStore(s store.Store) *heldStore {
	return &heldStore{
		Store:     s,
		resolving: make(chan struct{}), letResolve: make(chan struct{}), resolved: make(chan struct{}),
		probing: make(chan struct{}), letProbe: make(chan struct{}),
		statusReturn: make(chan struct{}, 64),
		statusRead:   make(chan struct{}), letStatus: make(chan struct{}),
	}
}

func (s *heldStore) RecordFailure(ctx context.Context, name string, p store.Policy, failures int64, n []int64) (store.Verdict, error) {
	if s.cut.Load() {
		return store.Verdict{}, errCut
	}
	return s.Store.RecordFailure(ctx, name, p, failures, n)
}

func (s *heldStore) AcquireProbe(ctx context.Context, name, token string, epoch uint64, lease time.Duration) (bool, store.Status, error) {
	if s.holdProbe.CompareAndSwap(true, false) {
		close(s.probing)
		<-s.letProbe
	}
	if s.cut.Load() {
		return false, store.Status{}, errCut
	}
	return s.Store.AcquireProbe(ctx, name, token, epoch, lease)
}

func (s *heldStore) Resolve(ctx context.Context, name, token string, epoch uint64, o classify.Outcome, d time.Duration, why store.Reason) (store.Status, bool, error) {
	if s.holdResolve.CompareAndSwap(true, false) {
		close(s.resolving)
		<-s.letResolve
		defer close(s.resolved)
	}
	return s.Store.Resolve(ctx, name, token, epoch, o, d, why)
}

func (s *heldStore) Status(ctx context.Context, names []string) ([]store.Status, error) {
	defer func() {
		s.statusCalls.Add(1)
		select {
		case s.statusReturn <- struct{}{}:
		default:
		}
	}()
	if s.cut.Load() {
		return nil, errCut
	}
	st, err := s.Store.Status(ctx, names)
	if s.holdStatus.CompareAndSwap(true, false) {
		close(s.statusRead)
		<-s.letStatus
	}
	return st, err
}

// sharedPair is two managers (two replicas of a service) on one mock clock
// sharing the breaker "svc" through one in-memory store, each through its
// own heldStore. Store calls never time out on their own, and the resync
// runs every 5s of the mock clock.
func sharedPair(t *testing.T, cfg manager.Config) (*clock.Mock, *store.Memory, [2]*manager.Manager, [2]*manager.Breaker, [2]*heldStore) {
	t.Helper()
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	var ms [2]*manager.Manager
	var bs [2]*manager.Breaker
	var hs [2]*heldStore
	for i := range ms {
		ms[i] = manager.Start(manager.Options{Clock: mock, Logger: quietLogger, StoreTimeout: time.Hour, Resync: 5 * time.Second})
		t.Cleanup(ms[i].Stop)
		hs[i] = newHeldStore(mem)
		c := cfg
		c.Store = hs[i]
		bs[i] = register(t, ms[i], "svc", c)
	}
	return mock, mem, ms, bs, hs
}

// sharedStatus reads the store's status of "svc".
func sharedStatus(t *testing.T, mem *store.Memory) store.Status {
	t.Helper()
	st, err := mem.Status(context.Background(), []string{"svc"})
	require.NoError(t, err)
	return st[0]
}

// sharedHalfOpen trips the pair's breaker through replica 0 and lets its
// open period run out, and replica 1's lag after it: both replicas end
// half-open.
func sharedHalfOpen(t *testing.T, mock *clock.Mock, ms [2]*manager.Manager, bs [2]*manager.Breaker, failures int) {
	t.Helper()
	fail(t, bs[0], failures)
	syncAll(ms[:])
	requireState(t, bs[1], breaker.Open, "replica 1 after replica 0's trip")
	mock.Add(time.Second + maxLag)
	syncAll(ms[:])
	for _, b := range bs {
		requireState(t, b, breaker.HalfOpen, "after the open period")
	}
}

var sharedCfg = manager.Config{
	Strategy: breaker.Consecutive{Failures: 2},
	Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: time.Minute},
}

// releaseProbe releases p with a success on another goroutine (the
// verdict may be sent to the store on the caller's goroutine) and returns
// a channel closed once Release has returned.
func releaseProbe(p manager.Permit) <-chan struct{} {
	done := make(chan struct{})
	go func() { defer close(done); p.Release(nil) }()
	return done
}

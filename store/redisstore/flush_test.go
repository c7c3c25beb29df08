package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

// trialService is a service behind a shared breaker that recovers as the
// breaker opens: it counts the calls that reach it, holds the first one (a
// trial call, the breaker being open) until released, and notes every call
// that overlaps a trial: at most one trial call may be in flight fleet-wide,
// and no other call beside it.
type trialService struct {
	first   chan struct{}
	release chan struct{}
	once    sync.Once

	mu        sync.Mutex
	inflight  int // calls in flight
	trials    int // trial calls (probes) in flight
	calls     int
	probes    int
	overlaps  []string
	duringOne int // calls that started while the held trial was in flight
	holding   bool
}

func newTrialService() *trialService {
	return &trialService{first: make(chan struct{}), release: make(chan struct{})}
}

// call is the service, reached through peer id with a permit that is a
// probe or not.
func (s *trialService) call(id int, probe bool) {
	s.mu.Lock()
	s.calls++
	if probe {
		s.probes++
	}
	if s.holding {
		s.duringOne++
	}
	if s.inflight > 0 && (probe || s.trials > 0) && len(s.overlaps) < 10 {
		s.overlaps = append(s.overlaps, fmt.Sprintf("peer %d (probe=%v) while %d call(s), %d of them trials, were in flight", id, probe, s.inflight, s.trials))
	}
	s.inflight++
	if probe {
		s.trials++
	}
	hold := false
	s.once.Do(func() { hold, s.holding = true, true })
	s.mu.Unlock()
	if hold {
		close(s.first)
		<-s.release
		s.mu.Lock()
		s.holding = false
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.inflight--
	if probe {
		s.trials--
	}
	s.mu.Unlock()
}

// Three managers share a breaker on a real redis-server; it trips, one
// replica wins the probe and holds its trial call in flight, and Redis
// loses its data (FLUSHALL) meanwhile. No call reaches the service while
// that trial is in flight, in any replica: the others follow their local
// deadlines (the lease they saw) and do not take the emptied store for a
// closed breaker. The trial's success comes too late for the store, which
// lost its lease; the next probe finds the store behind, which takes the
// probe's epoch and holds the fleet open for one lease, so that a probe from
// before the loss ends before another starts; then one good probe closes
// the breaker everywhere, and no lease or open marker is left.
func TestRedisFlushAllDuringProbe(t *testing.T) {
	srv := redistest.Start(t)
	admin := newClient(t, srv)
	const (
		open  = 150 * time.Millisecond
		lease = time.Second // the probe's time, and so its lease
		hold  = 500 * time.Millisecond
	)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: open, ProbeTimeout: lease}}
	opts := manager.Options{Resync: 20 * time.Millisecond, StoreTimeout: 500 * time.Millisecond}
	peers := make([]*peer, 3)
	for i := range peers {
		peers[i] = startPeer(t, srv.Addr(), "svc", cfg, opts)
	}
	inspect := redisstore.New(admin, redisstore.Options{})
	status := func() string {
		st, err := inspect.Status(context.Background(), []string{"svc"})
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%+v", st[0])
	}
	states := func() string {
		var out string
		for i, p := range peers {
			st := p.b.Stats()
			out += fmt.Sprintf(" peer %d %v down=%v errors=%d;", i, st.State, st.StoreDown, st.StoreErrors)
		}
		return out + " store " + status()
	}

	// The fleet trips through peer 0.
	require.ErrorIs(t, peers[0].b.Do(context.Background(), func(context.Context) error { return errBoom }), errBoom)
	require.Equal(t, breaker.Open, peers[0].b.State())
	for i, p := range peers {
		waitFor(t, 5*time.Second, fmt.Sprintf("peer %d follows the trip", i), func() bool { return p.b.State() != breaker.Closed })
	}

	svc := newTrialService()
	stop := make(chan struct{})
	var callers sync.WaitGroup
	var stopOnce sync.Once
	stopCallers := func() {
		stopOnce.Do(func() {
			close(stop)
			svc.once.Do(func() {}) // nothing is held from now on
			select {
			case <-svc.release:
			default:
				close(svc.release)
			}
			callers.Wait()
		})
	}
	t.Cleanup(stopCallers)
	var unexpected atomic.Value
	for i, p := range peers {
		for range 8 {
			callers.Add(1)
			go func() {
				defer callers.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					pm, err := p.b.Acquire(context.Background())
					if err != nil {
						if !errors.Is(err, breaker.ErrOpen) {
							unexpected.CompareAndSwap(nil, fmt.Sprintf("peer %d: Acquire: %v", i, err))
						}
						time.Sleep(time.Millisecond)
						continue
					}
					svc.call(i, pm.Probe())
					pm.Release(nil)
				}
			}()
		}
	}

	// One replica's probe is in flight: Redis loses everything.
	select {
	case <-svc.first:
	case <-time.After(5 * time.Second):
		t.Fatalf("no trial call within 5s:%s", states())
	}
	before := status()
	require.NoError(t, admin.FlushAll(context.Background()).Err())
	t.Logf("FLUSHALL with the trial in flight; the store was %s", before)
	deadline := time.Now().Add(hold)
	for time.Now().Before(deadline) {
		for i, p := range peers {
			if st := p.b.State(); st == breaker.Closed {
				t.Errorf("peer %d closed while the trial was in flight after FLUSHALL:%s", i, states())
				deadline = time.Time{}
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	svc.mu.Lock()
	during := svc.duringOne
	svc.mu.Unlock()
	assert.Zero(t, during, "calls that reached the service while the trial was in flight")
	close(svc.release)

	// The fleet recovers: one good probe closes the breaker on every peer,
	// and nothing is left in the store.
	waitFor(t, 5*lease, "every peer closed, the store closed with no lease:"+states(), func() bool {
		st, err := inspect.Status(context.Background(), []string{"svc"})
		if err != nil || st[0].Opened() || st[0].Open != 0 || st[0].Probe != 0 {
			return false
		}
		for _, p := range peers {
			if p.b.State() != breaker.Closed {
				return false
			}
		}
		return true
	})
	stopCallers()
	if v := unexpected.Load(); v != nil {
		t.Error(v)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	assert.Empty(t, svc.overlaps, "calls that overlapped a trial call")
	assert.GreaterOrEqual(t, svc.probes, 2, "trial calls: the held one, and the one that closed the fleet")
	for i, p := range peers {
		assert.Zero(t, p.b.Stats().StoreErrors, "peer %d: store errors", i)
	}
	t.Logf("calls=%d probes=%d; %s", svc.calls, svc.probes, states())
}

package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
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
)

// trials counts the trial calls (probe permits) in flight across a fleet,
// and the most there ever were at once.
type trials struct {
	now, most, total atomic.Int64
}

func (tr *trials) start() {
	n := tr.now.Add(1)
	tr.total.Add(1)
	for {
		m := tr.most.Load()
		if n <= m || tr.most.CompareAndSwap(m, n) {
			return
		}
	}
}

func (tr *trials) end() { tr.now.Add(-1) }

// hammer runs goroutines calls through b until stop is closed: while
// failing is set, each call fails with probability 0.45, as the service
// answers it (after the call's time, so that no call fails once failing
// is clear). Each call takes a little time, as a service's does, so that
// calls (trials among them) overlap.
func hammer(b *manager.Breaker, goroutines int, failing *atomic.Bool, tr *trials, stop <-chan struct{}, wg *sync.WaitGroup) {
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				p, err := b.Acquire(context.Background())
				if err != nil {
					// Declined: pace the loop as a caller backing
					// off would, instead of spinning on the CPU.
					time.Sleep(100 * time.Microsecond)
					continue
				}
				if p.Probe() {
					tr.start()
				}
				time.Sleep(50 * time.Microsecond) // the service's own time
				var callErr error
				if failing.Load() && rng.Float64() < 0.45 {
					callErr = errBoom
				}
				if p.Probe() {
					tr.end()
				}
				p.Release(callErr)
			}
		}()
	}
}

// hammerRuns is how many times TestFleetHammerClosesOnceHealthy runs its
// script: FUSEBOX_HAMMER_RUNS, or 1.
func hammerRuns(t *testing.T) int {
	n := 1
	if s := os.Getenv("FUSEBOX_HAMMER_RUNS"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err, "FUSEBOX_HAMMER_RUNS")
	}
	return n
}

// Two managers with 128 goroutines each call through one shared breaker
// (Consecutive{3}, open for 5ms, probes that may run for a minute, a 50ms
// resync) while 45% of calls fail, for long enough that the fleet trips and
// probes hundreds of times; then every call succeeds. Within a second the
// whole fleet is closed, and no probe lease is left in Redis: a lease whose
// holder's probe ended is never left to run out its minute. Across the
// fleet there is never more than one trial call in flight.
func TestFleetHammerClosesOnceHealthy(t *testing.T) {
	srv := redistest.Start(t)
	runs := hammerRuns(t)
	failed := 0
	for run := range runs {
		name := fmt.Sprintf("svc-%d", run)
		if !t.Run(name, func(t *testing.T) { hammerOnce(t, srv.Addr(), name) }) {
			failed++
		}
	}
	t.Logf("%d runs, %d failed", runs, failed)
}

func hammerOnce(t *testing.T, addr, name string) {
	load := 3 * time.Second
	if testing.Short() {
		load = time.Second
	}
	cfg := manager.Config{
		Strategy: breaker.Consecutive{Failures: 3},
		Recover:  recover.BasicTimeout{Open: 5 * time.Millisecond, ProbeTimeout: time.Minute},
	}
	opts := manager.Options{Resync: 50 * time.Millisecond}
	peers := []*peer{startPeer(t, addr, name, cfg, opts), startPeer(t, addr, name, cfg, opts)}
	var failing atomic.Bool
	failing.Store(true)
	var tr trials
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range peers {
		hammer(p.b, 128, &failing, &tr, stop, &wg)
	}
	stopped := false
	end := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer end()
	time.Sleep(load) // the load runs for this long
	failing.Store(false)
	healthy := time.Now()
	closed := func() bool {
		for _, p := range peers {
			if p.b.State() != breaker.Closed {
				return false
			}
		}
		return true
	}
	deadline := healthy.Add(time.Second)
	for !closed() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	took := time.Since(healthy)
	wasClosed := closed()
	var states []string
	for _, p := range peers {
		st := p.b.Stats()
		states = append(states, fmt.Sprintf("%v (declined %d, stale %d, store errors %d)", st.State, st.Declined, st.Stale, st.StoreErrors))
	}
	// With the load over (a call that read failing just before it was
	// cleared may still have failed, and tripped the fleet again), no
	// call is in flight: a lease left in Redis is one whose probe ended.
	end()
	c := peers[0].c
	lease, err := c.PTTL(context.Background(), peers[0].st.Key(name, "probe")).Result()
	require.NoError(t, err)
	t.Logf("%d trials; closed %v after the load turned healthy; states %v", tr.total.Load(), took.Round(time.Millisecond), states)
	require.Truef(t, wasClosed, "the fleet is not closed 1s after the load turned healthy: %v; the probe lease has %v left", states, lease)
	assert.LessOrEqual(t, tr.most.Load(), int64(1), "trial calls in flight at once across the fleet")
	assert.Greater(t, tr.total.Load(), int64(10), "the fleet probed often enough for the test to mean something")
	if lease > 0 {
		t.Errorf("with no call in flight, Redis still holds a probe lease with %v left", lease)
	}
}

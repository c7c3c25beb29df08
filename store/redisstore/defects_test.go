package redisstore_test

// Three defects a chaos run of the fleet found, each replayed here on a
// real redis-server, with a loopback proxy per manager playing the
// network's faults (faultProxy).

import (
	"context"
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
	"github.com/fusebox-go/fusebox/store"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

// A forces the fleet open and B follows; B's link to Redis is black-holed
// until B says StoreDown; A resets the fleet; B's link heals. B was forced
// by following A, not by hand: on its return it follows the Reset, and
// the fleet is closed and unforced within 5 s, and stays so. (It forced
// the fleet again, for good, as if it had been forced by hand during the
// outage.) With every Fallback.
func TestFleetResetSurvivesAReplicaCutOff(t *testing.T) {
	srv := redistest.Start(t)
	for _, f := range []store.Fallback{store.FallbackLocal, store.FailOpen, store.FailClosed} {
		t.Run(fallbackName(f), func(t *testing.T) {
			name := "reset-" + fallbackName(f)
			cfg := manager.Config{
				Strategy: breaker.Consecutive{Failures: 3},
				Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: time.Second},
				Fallback: f,
			}
			opts := manager.Options{StoreTimeout: 200 * time.Millisecond, Resync: 100 * time.Millisecond}
			pa, pb := startFaultProxy(t, srv.Addr()), startFaultProxy(t, srv.Addr())
			a := startPeer(t, pa.addr(), name, cfg, opts)
			b := startPeer(t, pb.addr(), name, cfg, opts)

			require.NoError(t, a.b.ForceOpen())
			waitFor(t, 5*time.Second, "B follows A's forcing", func() bool {
				s := b.b.Snapshot()
				return s.State == breaker.Open && s.Forced
			})
			pb.blackhole()
			pb.reset()
			waitFor(t, 5*time.Second, "B says StoreDown", func() bool { return b.b.Stats().StoreDown })
			require.NoError(t, a.b.Reset())
			waitFor(t, 5*time.Second, "A closes", func() bool { return a.b.State() == breaker.Closed })
			pb.heal()
			back := time.Now()
			closed := func(r *peer) bool {
				s := r.b.Snapshot()
				return s.State == breaker.Closed && !s.Forced && !r.b.Stats().StoreDown
			}
			waitFor(t, 5*time.Second, "the fleet closed and unforced after B's return", func() bool { return closed(a) && closed(b) })
			t.Logf("the fleet is closed %v after B's return", time.Since(back).Round(time.Millisecond))
			// The defect forced the fleet again within 3 s of the return.
			for end := back.Add(4 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
				for i, r := range []*peer{a, b} {
					if s := r.b.Snapshot(); s.Forced || s.State != breaker.Closed {
						t.Fatalf("manager %d is %v (forced %v) %v after B's return: the Reset was undone", i, s.State, s.Forced, time.Since(back).Round(time.Millisecond))
					}
				}
			}
		})
	}
}

func fallbackName(f store.Fallback) string {
	switch f {
	case store.FailOpen:
		return "open"
	case store.FailClosed:
		return "closed"
	default:
		return "local"
	}
}

// Two managers share a FailClosed Consecutive{3} breaker (Open 20 ms,
// ProbeTimeout 500 ms) in front of a failing service; manager 0's link is
// given 150 ms of latency each way for a second, five times. No call is
// admitted by manager 0 while it says StoreDown both before and after
// Acquire (110 to 178 were: the local cycle of periods and probes went on
// after the store was lost), and no two trials are ever in flight in one
// process.
func TestFleetFailClosedAdmitsNothingWhileDown(t *testing.T) {
	srv := redistest.Start(t)
	cfg := manager.Config{
		Strategy: breaker.Consecutive{Failures: 3},
		Recover:  recover.BasicTimeout{Open: 20 * time.Millisecond, ProbeTimeout: 500 * time.Millisecond},
		Fallback: store.FailClosed,
	}
	opts := manager.Options{StoreTimeout: 200 * time.Millisecond, Resync: 100 * time.Millisecond}
	var proxies []*faultProxy
	var peers []*peer
	for range 2 {
		p := startFaultProxy(t, srv.Addr())
		proxies = append(proxies, p)
		peers = append(peers, startPeer(t, p.addr(), "failclosed", cfg, opts))
	}
	var admittedDown, admitted, downSeen atomic.Int64
	var trials [2]atomic.Int32 // trials in flight, per manager
	var mu sync.Mutex
	var overlaps []string
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, r := range peers {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					before := r.b.Stats().StoreDown
					p, err := r.b.Acquire(context.Background())
					after := r.b.Stats().StoreDown
					if before && after {
						downSeen.Add(1)
					}
					if err != nil {
						time.Sleep(100 * time.Microsecond)
						continue
					}
					admitted.Add(1)
					if i == 0 && before && after {
						admittedDown.Add(1)
					}
					if p.Probe() {
						if n := trials[i].Add(1); n > 1 {
							mu.Lock()
							overlaps = append(overlaps, fmt.Sprintf("manager %d: %d trials in flight (gen %d)", i, n, r.b.Snapshot().Gen))
							mu.Unlock()
						}
						time.Sleep(time.Millisecond)
						trials[i].Add(-1)
					}
					p.Release(errBoom)
				}
			}()
		}
	}
	for range 5 {
		proxies[0].setDelay(150 * time.Millisecond)
		time.Sleep(time.Second)
		proxies[0].setDelay(0)
		time.Sleep(500 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	t.Logf("%d calls admitted; %d Acquires while StoreDown before and after", admitted.Load(), downSeen.Load())
	assert.Positive(t, downSeen.Load(), "manager 0 said StoreDown at some point: the test tests nothing otherwise")
	assert.Zero(t, admittedDown.Load(), "calls admitted by manager 0 while it said StoreDown before and after Acquire")
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, overlaps, "trials in flight at once in one process")
}

// A manager whose link is black-holed and whose connections are reset
// stops within a second (StoreTimeout 200 ms) while the partition lasts.
// (Stop waited for the watch's close, behind go-redis's PubSub lock, held
// by the reader reconnecting and waiting for the HELLO's reply: 3 s or
// more.)
func TestFleetStopDuringAPartition(t *testing.T) {
	srv := redistest.Start(t)
	cfg := manager.Config{
		Strategy: breaker.Consecutive{Failures: 3},
		Recover:  recover.BasicTimeout{Open: time.Second},
	}
	opts := manager.Options{StoreTimeout: 200 * time.Millisecond, Resync: 100 * time.Millisecond}
	for round := range 3 {
		p := startFaultProxy(t, srv.Addr())
		r := startPeer(t, p.addr(), fmt.Sprintf("stop-%d", round), cfg, opts)
		r.m.Sync()
		time.Sleep(200 * time.Millisecond) // the watch subscribed; a resync or two
		p.blackhole()
		p.reset()
		time.Sleep(time.Duration(round) * 300 * time.Millisecond) // the reader reconnects into the hole
		start := time.Now()
		stopped := make(chan struct{})
		go func() {
			r.m.Stop()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
		}
		took := time.Since(start)
		p.heal()
		<-stopped
		t.Logf("round %d: Stop took %v", round, took.Round(time.Millisecond))
		assert.Less(t, took, time.Second, "round %d: Stop during a partition", round)
	}
}

// A FailClosed breaker reset by hand while its store is unreachable lifts
// its forcing but declines every call until the store answers, as the
// fallback says; then it follows the store. (It closed, and let
// every call through while it said StoreDown: found by the fleet soak,
// seed 1.)
func TestFleetFailClosedResetWhileDown(t *testing.T) {
	srv := redistest.Start(t)
	cfg := manager.Config{
		Strategy: breaker.Consecutive{Failures: 3},
		Recover:  recover.BasicTimeout{Open: time.Second},
		Fallback: store.FailClosed,
	}
	opts := manager.Options{StoreTimeout: 200 * time.Millisecond, Resync: 100 * time.Millisecond}
	p := startFaultProxy(t, srv.Addr())
	r := startPeer(t, p.addr(), "failclosed-reset", cfg, opts)
	require.NoError(t, r.b.ForceOpen())
	p.blackhole()
	p.reset()
	waitFor(t, 5*time.Second, "StoreDown", func() bool { return r.b.Stats().StoreDown })
	require.NoError(t, r.b.Reset())
	s := r.b.Snapshot()
	assert.False(t, s.Forced, "the Reset lifts the forcing")
	assert.Equal(t, breaker.Open, s.State, "failing closed while the store is down")
	for range 100 {
		if _, err := r.b.Acquire(context.Background()); err == nil {
			t.Fatalf("a call admitted while StoreDown=%v", r.b.Stats().StoreDown)
		}
		time.Sleep(time.Millisecond)
	}
	p.heal()
	// The Reset was this process's alone: back, it follows the fleet's
	// forcing, which a Reset now lifts for every process.
	waitFor(t, 5*time.Second, "back, forced as the store says", func() bool {
		return !r.b.Stats().StoreDown && r.b.Snapshot().Forced
	})
	require.NoError(t, r.b.Reset())
	assert.Equal(t, breaker.Closed, r.b.State())
}

// Redis loses its data (FLUSHALL; a restart empty is the same) while the
// fleet's epochs are high; then a process forces the fleet open, and the
// fleet is reset. Every process follows both, whatever state it was in
// when the data went: closed, or open after a trip. (A process open or
// forced kept its epoch, above the emptied store's, and followed nothing
// the fleet did until the store's epochs passed it: found by the fleet
// soak, seed 2, as managers still forced 2.6s after the last Reset.)
func TestFleetFollowsAfterRedisLostItsData(t *testing.T) {
	srv := redistest.Start(t)
	admin := newClient(t, srv)
	for _, variant := range []string{"closed", "open"} {
		t.Run(variant, func(t *testing.T) {
			require.NoError(t, admin.FlushAll(context.Background()).Err())
			cfg := manager.Config{
				Strategy: breaker.Consecutive{Failures: 3},
				Recover:  recover.BasicTimeout{Open: 5 * time.Second, ProbeTimeout: time.Second},
				Fallback: store.FailClosed,
			}
			opts := manager.Options{StoreTimeout: 250 * time.Millisecond, Resync: 100 * time.Millisecond}
			var rs []*peer
			for range 3 {
				rs = append(rs, startPeer(t, srv.Addr(), "lost-"+variant, cfg, opts))
			}
			all := func(what string, ok func(*breaker.Snapshot) bool) {
				t.Helper()
				waitFor(t, 3*time.Second, what, func() bool {
					for _, r := range rs {
						if !ok(r.b.Snapshot()) {
							return false
						}
					}
					return true
				})
			}
			forced := func(s *breaker.Snapshot) bool { return s.Forced }
			closed := func(s *breaker.Snapshot) bool { return s.State == breaker.Closed }
			for range 5 { // the fleet's epochs climb to 10
				require.NoError(t, rs[0].b.ForceOpen())
				all("forced", forced)
				require.NoError(t, rs[0].b.Reset())
				all("closed", closed)
			}
			if variant == "open" {
				for range 3 {
					if p, err := rs[1].b.Acquire(context.Background()); err == nil {
						p.Release(errBoom)
					}
				}
				all("open after a trip", func(s *breaker.Snapshot) bool { return s.State == breaker.Open })
			}
			require.NoError(t, admin.FlushAll(context.Background()).Err())
			require.NoError(t, rs[2].b.ForceOpen())
			all("every process follows a forcing made after the loss", forced)
			require.NoError(t, rs[0].b.Reset())
			all("every process follows the Reset", closed)
		})
	}
}

// A manager that joins a fleet whose open period is over (half-open, no
// lease held) with callers waiting takes, for its first probe, the lease
// its Recover gives (ProbeTimeout 500ms), not fleet.DefaultLease (10s):
// the probe's lease was decided by the loop after the breaker followed the
// fleet, and a caller could win the probe first. (Found by the fleet soak,
// seed 573666, 10 minutes under -race: a lease of 10s, ProbeTimeout 1s,
// held by a manager that had just replaced another.)
func TestFleetJoinerTakesItsOwnLease(t *testing.T) {
	srv := redistest.Start(t)
	admin := newClient(t, srv)
	inspect := redisstore.New(admin, redisstore.Options{})
	cfg := manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: 50 * time.Millisecond, ProbeTimeout: 500 * time.Millisecond},
	}
	opts := manager.Options{StoreTimeout: 250 * time.Millisecond, Resync: 100 * time.Millisecond}
	for round := range 10 {
		name := fmt.Sprintf("joiner-%d", round)
		a := startPeer(t, srv.Addr(), name, cfg, opts)
		require.ErrorIs(t, a.b.Do(context.Background(), func(context.Context) error { return errBoom }), errBoom)
		waitFor(t, 5*time.Second, "the fleet's period is over", func() bool {
			st, err := inspect.Status(context.Background(), []string{name})
			return err == nil && st[0].Opened() && st[0].Open == 0 && st[0].Probe == 0
		})
		b := startPeer(t, srv.Addr(), name, cfg, opts)
		var probed atomic.Bool
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for deadline := time.Now().Add(3 * time.Second); !probed.Load() && time.Now().Before(deadline); {
					p, err := b.b.Acquire(context.Background())
					if err != nil {
						continue
					}
					if p.Probe() && !probed.Swap(true) {
						bs, _, err := inspect.Inspect(context.Background(), name)
						assert.NoError(t, err)
						assert.LessOrEqual(t, bs.Probe, 500*time.Millisecond, "round %d: the joiner's first lease", round)
					}
					p.Release(nil)
				}
			}()
		}
		wg.Wait()
		require.True(t, probed.Load(), "round %d: the joiner probed", round)
		a.stop()
		b.stop()
	}
}

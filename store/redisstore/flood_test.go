package redisstore_test

import (
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
)

// Eight goroutines force a shared breaker open and reset it as fast as
// they can, each a round trip to Redis and a change every manager hears,
// while 32 goroutines subscribe to the manager's events and unsubscribe:
// the manager's loop, flooded with transitions and changes, still ends
// every subscription within 100ms.
func TestFleetUnsubscribeUnderAFlood(t *testing.T) {
	srv := redistest.Start(t)
	p := startPeer(t, srv.Addr(), "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 3}}, manager.Options{})
	other := startPeer(t, srv.Addr(), "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 3}}, manager.Options{})
	p.m.Sync()
	other.m.Sync()

	stop := make(chan struct{})
	var flips sync.WaitGroup
	for i := range 8 {
		flips.Add(1)
		go func() {
			defer flips.Done()
			b := p.b
			if i%2 == 1 {
				b = other.b
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = b.ForceOpen()
				_ = b.Reset()
			}
		}()
	}
	var (
		mu    sync.Mutex
		took  []time.Duration
		subs  sync.WaitGroup
		until = time.Now().Add(2 * time.Second)
	)
	for range 32 {
		subs.Add(1)
		go func() {
			defer subs.Done()
			for time.Now().Before(until) {
				events, unsubscribe := p.m.Subscribe(16)
				for range 4 {
					select {
					case <-events:
					case <-time.After(10 * time.Millisecond):
					}
				}
				start := time.Now()
				unsubscribe()
				d := time.Since(start)
				mu.Lock()
				took = append(took, d)
				mu.Unlock()
			}
		}()
	}
	subs.Wait()
	close(stop)
	flips.Wait()

	require.NotEmpty(t, took)
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	over := 0
	for _, d := range took {
		if d > 100*time.Millisecond {
			over++
		}
	}
	t.Logf("%d unsubscribes: p50 %v, p99 %v, max %v; %d over 100ms", len(took), took[len(took)/2], took[len(took)*99/100], took[len(took)-1], over)
	assert.Zero(t, over, "unsubscribes that took over 100ms")
}

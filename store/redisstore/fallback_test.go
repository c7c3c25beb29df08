package redisstore_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

// Two replicas, each with a FailOpen, a FailClosed and a FallbackLocal
// breaker, under load that keeps them tripping and probing; redis-server is
// killed with SIGKILL. Each breaker reports StoreDown; from the moment it
// does, the FailClosed breaker declines every call, whatever timer or
// probe it had running, and the FailOpen one admits every call.
func TestFleetFallbackAfterRedisKilled(t *testing.T) {
	srv := redistest.Start(t)
	fallbacks := []store.Fallback{store.FailOpen, store.FailClosed, store.FallbackLocal}
	type replica struct {
		m  *manager.Manager
		c  *redis.Client
		bs []*manager.Breaker
	}
	var reps []replica
	for range 2 {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
		st := redisstore.New(c, redisstore.Options{})
		m := manager.Start(manager.Options{Logger: quiet, Resync: 20 * time.Millisecond, StoreTimeout: 50 * time.Millisecond})
		r := replica{m: m, c: c}
		for _, f := range fallbacks {
			b, err := m.Register(fmt.Sprintf("svc-%d", f), manager.Config{
				Strategy: breaker.Consecutive{Failures: 3},
				Recover:  recover.BasicTimeout{Open: 10 * time.Millisecond, ProbeTimeout: time.Second},
				Store:    st,
				Fallback: f,
			})
			require.NoError(t, err)
			r.bs = append(r.bs, b)
		}
		m.Sync()
		reps = append(reps, r)
		t.Cleanup(func() { m.Stop(); c.Close() })
	}

	// Load: eight goroutines per breaker, half of the calls failing.
	var failing atomic.Bool
	failing.Store(true)
	var tr trials
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, r := range reps {
		for _, b := range r.bs {
			hammer(b, 8, &failing, &tr, stop, &wg)
		}
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	time.Sleep(300 * time.Millisecond) // let the load trip and probe the breakers
	srv.Kill()
	// The clients' pools keep dialing a dead server; one that answers again
	// lets them, and the breakers, come back before the test ends.
	defer func() {
		srv.Restart()
		for _, r := range reps {
			for _, b := range r.bs {
				waitFor(t, 5*time.Second, b.Name()+" finds its store again", func() bool { return !b.Stats().StoreDown })
			}
		}
		// A pool that failed to dial retries every second on a goroutine
		// of its own until a dial works.
		waitFor(t, 5*time.Second, "the clients' dialers stop", func() bool {
			buf := make([]byte, 1<<20)
			return !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "pool.(*ConnPool).tryDial")
		})
	}()

	for _, r := range reps {
		for i, b := range r.bs {
			waitFor(t, 5*time.Second, fmt.Sprintf("%s reports StoreDown", b.Name()), func() bool { return b.Stats().StoreDown })
			r.m.Sync()
			switch fallbacks[i] {
			case store.FailClosed:
				// Every call is declined, for as long as the store is
				// away: no timer or probe lets one through.
				let := 0
				for range 200 {
					if p, err := b.Acquire(context.Background()); err == nil {
						let++
						p.Release(nil)
					}
					time.Sleep(time.Millisecond) // over the open period and beyond
				}
				assert.Zero(t, let, "%s let calls through while its store was down", b.Name())
				assert.Equal(t, breaker.Open, b.State(), b.Name())
			case store.FailOpen:
				for range 200 {
					p, err := b.Acquire(context.Background())
					if assert.NoError(t, err, "%s declined a call while its store was down", b.Name()) {
						p.Release(errBoom)
					}
				}
				assert.Equal(t, breaker.Closed, b.State(), b.Name())
			}
		}
	}
}

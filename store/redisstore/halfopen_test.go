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

// TestHalfOpenFleet: three managers share a breaker through a real
// redis-server, open for an hour. HalfOpen in one of them ends the period
// for all three; of 3 x 20 callers racing for it, exactly one gets a
// permit, the probe; its success closes every manager into the fleet's
// slow start.
func TestHalfOpenFleet(t *testing.T) {
	srv := redistest.Start(t)
	const n, callers = 3, 20
	var bs []*manager.Breaker
	for i := range n {
		m := manager.Start(manager.Options{Logger: quiet, Name: fmt.Sprintf("web-%d", i)})
		t.Cleanup(m.Stop)
		b, err := m.Register("svc", manager.Config{
			Strategy:  breaker.Consecutive{Failures: 1},
			Recover:   recover.BasicTimeout{Open: time.Hour, ProbeTimeout: 10 * time.Second},
			Store:     redisstore.New(newClient(t, srv), redisstore.Options{}),
			SlowStart: 5 * time.Second,
		})
		require.NoError(t, err)
		m.Sync()
		bs = append(bs, b)
	}
	every := func(st breaker.State) func() bool {
		return func() bool {
			for _, b := range bs {
				if b.State() != st {
					return false
				}
			}
			return true
		}
	}
	p, err := bs[0].Acquire(context.Background())
	require.NoError(t, err)
	p.Release(errors.New("down"))
	waitFor(t, 5*time.Second, "every manager open", every(breaker.Open))

	require.NoError(t, bs[1].HalfOpen())
	waitFor(t, 5*time.Second, "every manager half-open", every(breaker.HalfOpen))

	var granted atomic.Int32
	var probes sync.Map
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, b := range bs {
		for range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				p, err := b.Acquire(context.Background())
				if err != nil {
					assert.ErrorIs(t, err, breaker.ErrOpen, "manager %d: a caller declined", i)
					return
				}
				granted.Add(1)
				assert.True(t, p.Probe(), "manager %d: a call let through must be the probe", i)
				probes.Store(i, p)
			}()
		}
	}
	close(start)
	wg.Wait()
	require.Equal(t, int32(1), granted.Load(), "exactly one trial for the fleet")
	probes.Range(func(k, v any) bool {
		// Every other manager follows the lease before the verdict.
		for j, b := range bs {
			if j != k.(int) {
				waitFor(t, 5*time.Second, fmt.Sprintf("manager %d follows the lease", j), func() bool { return b.State() == breaker.Probing })
				_, err := b.Acquire(context.Background())
				assert.ErrorIs(t, err, breaker.ErrOpen, "manager %d while manager %v probes", j, k)
			}
		}
		v.(manager.Permit).Release(nil)
		return false
	})
	waitFor(t, 5*time.Second, "every manager closed", every(breaker.Closed))
	for i, b := range bs {
		s := b.Snapshot()
		require.NotNil(t, s.SlowStart, "manager %d: the slow start follows the trial", i)
		assert.Less(t, b.Stats().Admitted, 1.0, "manager %d admits a share of calls", i)
	}
}

package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store/redisstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// While Redis hangs (its process stopped with SIGSTOP), a failure's store
// round trip on the caller and Stop each end within about one
// StoreTimeout, not the client's socket timeouts (3s by default): the
// client honours context deadlines, as redisstore.New requires.
func TestRedisHungBoundedWaits(t *testing.T) {
	srv := redistest.Start(t)
	const timeout = 100 * time.Millisecond
	const bound = 1500 * time.Millisecond // well under the client's 3s read timeout
	st := redisstore.New(newClient(t, srv), redisstore.Options{})
	m := manager.Start(manager.Options{Logger: quiet, StoreTimeout: timeout})
	stopped := false
	defer func() {
		if !stopped {
			m.Stop()
		}
	}()
	b, err := m.Register("svc", manager.Config{Strategy: breaker.Consecutive{Failures: 100}, Store: st, Recover: recover.BasicTimeout{Open: time.Minute}})
	require.NoError(t, err)

	srv.Pause()
	p, err := b.Acquire(context.Background())
	require.NoError(t, err)
	start := time.Now()
	p.Release(errBoom)
	took := time.Since(start)
	assert.Less(t, took, bound, "a failure's store call while Redis hangs (StoreTimeout %v)", timeout)
	assert.GreaterOrEqual(t, took, timeout/2, "the failure did wait for the store")
	m.Sync()
	assert.Positive(t, b.Stats().StoreErrors)

	start = time.Now()
	m.Stop()
	stopped = true
	assert.Less(t, time.Since(start), bound, "Stop while Redis hangs (StoreTimeout %v)", timeout)
}

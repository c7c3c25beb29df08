package manager_test

import (
	"context"
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

// A Reset ends every ramp: after a recovery, the fleet's slow start runs
// in every process; a Reset in one of them ends it in all, at once (a
// Reset closes at full rate). On 19f756c the other process kept ramping,
// admitting a fifth of its calls two seconds after the Reset.
func TestSharedResetEndsEveryRamp(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: time.Second}, SlowStart: 10 * time.Second, Store: mem}
	var ms []*manager.Manager
	var bs []*manager.Breaker
	for _, name := range []string{"a", "b"} {
		m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, Resync: time.Hour, Name: name})
		t.Cleanup(m.Stop)
		ms, bs = append(ms, m), append(bs, register(t, m, "svc", cfg))
	}
	release(t, bs[0], errBoom)
	syncAll(ms)
	require.Equal(t, breaker.Open, bs[1].State(), "the fleet opened")
	mock.Add(time.Second)
	syncAll(ms)
	p, err := bs[0].Acquire(context.Background())
	require.NoError(t, err)
	require.True(t, p.Probe())
	p.Release(nil)
	syncAll(ms)
	mock.Add(time.Second)
	syncAll(ms)
	for i, b := range bs {
		require.Equal(t, breaker.Closed, b.State(), "manager %d", i)
		require.NotNil(t, b.Snapshot().SlowStart, "manager %d ramps after the recovery", i)
	}

	require.NoError(t, bs[0].Reset())
	syncAll(ms)
	for i, b := range bs {
		assert.Nil(t, b.Snapshot().SlowStart, "manager %d still ramps after the Reset", i)
	}
}

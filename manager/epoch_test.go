package manager_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/store"
)

// A probe's verdict from an epoch the fleet has left changes nothing: here
// the fleet is reset while replica 0 probes, and replica 0's failed probe
// must not open it again; no lease is left behind.
func TestSharedLateVerdictIsFenced(t *testing.T) {
	mock, mem, ms, bs, _ := sharedPair(t, sharedCfg)
	sharedHalfOpen(t, mock, ms, bs, 2)
	p := probe(t, bs[0])
	require.NoError(t, bs[1].Reset()) // the fleet closes, in a new epoch
	p.Release(errBoom)
	ms[0].Sync()              // the failed verdict's store call
	mock.Add(5 * time.Second) // a resync
	syncAll(ms[:])
	for _, b := range bs {
		requireState(t, b, breaker.Closed, "after the Reset, the late verdict and a resync")
	}
	st := sharedStatus(t, mem)
	assert.False(t, st.Opened(), "the late failed verdict reopened the fleet: %+v", st)
	assert.Zero(t, st.Probe, "a lease was left behind")
}

// A replica whose watch missed a close learns of it from the next status:
// the store's epoch is past the one its open state belongs to.
func TestSharedMissedCloseIsLearnt(t *testing.T) {
	mock, mem, ms, bs, _ := sharedPair(t, sharedCfg)
	sharedHalfOpen(t, mock, ms, bs, 2)
	// The fleet closes behind replica 1's back: the probe is won and
	// resolved in the store directly, and no change reaches the watchers
	// before replica 1 reads the status.
	st, err := mem.Status(context.Background(), []string{"svc"})
	require.NoError(t, err)
	ok, _, err := mem.AcquireProbe(context.Background(), "svc", "elsewhere", st[0].Epoch, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	_, applied, err := mem.Resolve(context.Background(), "svc", "elsewhere", st[0].Epoch, classify.Success, 0, store.Reason{})
	require.NoError(t, err)
	require.True(t, applied)
	mock.Add(5 * time.Second) // a resync
	ms[1].Sync()
	requireState(t, bs[1], breaker.Closed, "after a resync that read the close it missed")
}

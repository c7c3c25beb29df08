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
	ms[0].Sync()
	waitFor(t, 5*time.Second, "the verdict's store call", func() bool {
		st := sharedStatus(t, mem)
		return !st.Opened() && st.Open == 0 && st.Probe == 0
	})
	mock.Add(5 * time.Second) // a resync
	waitFor(t, 5*time.Second, "both replicas closed", func() bool {
		ms[0].Sync()
		ms[1].Sync()
		return bs[0].State() == breaker.Closed && bs[1].State() == breaker.Closed
	})
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
	waitFor(t, 5*time.Second, "replica 1 closed", func() bool { ms[1].Sync(); return bs[1].State() == breaker.Closed })
}

package manager_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
)

// A probe's verdict may reach the store late, its replica's callers going
// on meanwhile. The run of failures that tripped the breaker must not count
// in the new closed period: a breaker that trips on the second failure in a
// row must not trip on the first failure after it recovered. While the
// verdict is on its way the replica stays probing, so no call of the new
// period can come before the store has the verdict.
func TestFaultSharedLateVerdictOldFailuresCount(t *testing.T) {
	mock, _, ms, bs, hs := sharedPair(t, sharedCfg)
	sharedHalfOpen(t, mock, ms, bs, 2)
	hs[0].holdResolve.Store(true)
	released := releaseProbe(probe(t, bs[0]))
	received(t, hs[0].resolving, "the probe's verdict to be sent")
	requireState(t, bs[0], breaker.Probing, "while its verdict is on its way to the store")
	declined(t, bs[0])

	close(hs[0].letResolve)
	received(t, hs[0].resolved, "the verdict to be applied")
	received(t, released, "the probe's Release")
	ms[0].Sync()
	requireState(t, bs[0], breaker.Closed, "replica 0 once its probe's verdict is in the store")
	release(t, bs[0], errBoom)
	assert.Equal(t, breaker.Closed, bs[0].State(), "one failure after the recovery")
	release(t, bs[0], errBoom)
	assert.Equal(t, breaker.Open, bs[0].State(), "the second failure after the recovery")
}

// The verdict of a successful probe, applied late, must not erase an
// opening made after it: while replica 0's verdict is on its way, replica
// 1 resets the fleet and trips it again (two new failures), opening the
// breaker in the store in a newer epoch; then the verdict lands. The fleet
// must stay open.
func TestFaultSharedLateVerdictErasesNewOpening(t *testing.T) {
	mock, mem, ms, bs, hs := sharedPair(t, sharedCfg)
	sharedHalfOpen(t, mock, ms, bs, 2)
	hs[0].holdResolve.Store(true)
	released := releaseProbe(probe(t, bs[0]))
	received(t, hs[0].resolving, "the probe's verdict to be sent")

	require.NoError(t, bs[1].Reset())
	syncAll(ms[:])
	fail(t, bs[1], 2)
	syncAll(ms[:])
	requireState(t, bs[1], breaker.Open, "replica 1 after two new failures")
	opened := sharedStatus(t, mem)
	require.Positive(t, opened.Open, "the new opening in the store")

	close(hs[0].letResolve)
	received(t, hs[0].resolved, "the verdict to be applied")
	received(t, released, "the probe's Release")
	syncAll(ms[:])
	assert.Equal(t, opened.Epoch, sharedStatus(t, mem).Epoch, "the store after the late verdict: the opening made after the probe is gone")
	assert.Positive(t, sharedStatus(t, mem).Open, "the store after the late verdict")
	for i, b := range bs {
		assert.Equal(t, breaker.Open, b.State(), "replica %d after the late verdict", i)
	}
}

// A resync reads the store while this replica's probe holds the lease, and
// its answer reaches the manager only after the probe's success has closed
// the breaker here and in the store. That stale answer must not move the
// breaker back to probing (which declines every call).
func TestFaultSharedStaleResyncAfterVerdict(t *testing.T) {
	mock, mem, ms, bs, hs := sharedPair(t, sharedCfg)
	sharedHalfOpen(t, mock, ms, bs, 2)
	p := probe(t, bs[0])
	hs[0].holdStatus.Store(true)
	mock.Add(5 * time.Second) // the resync
	received(t, hs[0].statusRead, "the resync to read the store")

	// The verdict is the caller's store call: once Release returned, it is
	// in the store and applied here. (Replica 0's Sync would wait for the
	// resync the test holds.)
	received(t, releaseProbe(p), "the probe's Release")
	st := sharedStatus(t, mem)
	require.True(t, !st.Opened() && st.Open == 0 && st.Probe == 0, "the probe's verdict in the store: %+v", st)
	requireState(t, bs[0], breaker.Closed, "after its probe's success")
	close(hs[0].letStatus)
	ms[0].Sync()
	assert.Equal(t, breaker.Closed, bs[0].State(), "replica 0, closed by its probe, after a resync answer read while the probe held the lease")
}

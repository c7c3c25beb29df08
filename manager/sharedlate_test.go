package manager_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/fusebox-go/fusebox/breaker"
)

// A probe's verdict may reach the store after the replica that probed has
// closed its breaker, its callers going on meanwhile. The run of failures
// that tripped the breaker must not count in the new closed period: a
// breaker that trips on the second failure in a row must not trip on the
// first failure after it recovered, whether or not the store has heard of
// the recovery yet.
func TestFaultSharedLateVerdictOldFailuresCount(t *testing.T) {
	mock, _, ms, bs, hs := sharedPair(t, sharedCfg)
	sharedHalfOpen(t, mock, ms, bs, 2)
	hs[0].holdResolve.Store(true)
	released := releaseProbe(probe(t, bs[0]))
	received(t, hs[0].resolving, "the probe's verdict to be sent")

	if bs[0].State() == breaker.Closed { // closed before the store knows
		release(t, bs[0], errBoom)
		assert.Equal(t, breaker.Closed, bs[0].State(), "one failure after the recovery, while the verdict was on its way: the store still counted the failures from before the trip")
	}
	close(hs[0].letResolve)
	received(t, hs[0].resolved, "the verdict to be applied")
	received(t, released, "the probe's Release")
	waitFor(t, 5*time.Second, "replica 0 closed", func() bool { return bs[0].State() == breaker.Closed })
	if bs[0].Stats().Failures == 2 { // the failure above was not made
		release(t, bs[0], errBoom)
		assert.Equal(t, breaker.Closed, bs[0].State(), "one failure after the recovery")
	}
	release(t, bs[0], errBoom)
	assert.Equal(t, breaker.Open, bs[0].State(), "the second failure after the recovery")
}

// The verdict of a successful probe, applied late, must not erase an
// opening made after it: the replica that probed closes, trips again (two
// new failures), opens the breaker in the store; then its verdict lands.
// The fleet must stay open. (Nothing to check if the replica stays
// probing until the store has the verdict.)
func TestFaultSharedLateVerdictErasesNewOpening(t *testing.T) {
	mock, mem, ms, bs, hs := sharedPair(t, sharedCfg)
	sharedHalfOpen(t, mock, ms, bs, 2)
	hs[0].holdResolve.Store(true)
	released := releaseProbe(probe(t, bs[0]))
	received(t, hs[0].resolving, "the probe's verdict to be sent")

	reopened := false
	if bs[0].State() == breaker.Closed {
		for i := 0; i < 2 && bs[0].State() == breaker.Closed; i++ {
			release(t, bs[0], errBoom)
		}
		requireState(t, bs[0], breaker.Open, "after two new failures")
		waitFor(t, 5*time.Second, "the new opening to reach the store", func() bool { return sharedStatus(t, mem).Open > 0 })
		waitFor(t, 5*time.Second, "replica 1 to follow the new opening", func() bool { return bs[1].State() == breaker.Open })
		reopened = true
	}
	close(hs[0].letResolve)
	received(t, hs[0].resolved, "the verdict to be applied")
	received(t, released, "the probe's Release")
	if !reopened {
		return
	}
	assert.Positive(t, sharedStatus(t, mem).Open, "the store after the late verdict: the opening made after the probe is gone")
	for i, b := range bs {
		ms[i].Sync()
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

	received(t, releaseProbe(p), "the probe's Release")
	waitFor(t, 5*time.Second, "the verdict in the store and replica 0 closed", func() bool {
		st := sharedStatus(t, mem)
		return !st.Opened() && st.Open == 0 && st.Probe == 0 && bs[0].State() == breaker.Closed
	})
	close(hs[0].letStatus)
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) && bs[0].State() == breaker.Closed {
		ms[0].Sync()
		time.Sleep(time.Millisecond)
	}
	assert.Equal(t, breaker.Closed, bs[0].State(), "replica 0, closed by its probe, after a resync answer read while the probe held the lease")
}

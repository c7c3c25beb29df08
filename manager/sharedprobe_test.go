package manager_test

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/store"
)

// startFleet starts a fleet of n managers on mock sharing "svc" through
// mem, a Consecutive{Failures: 1} with Recover r, and syncs them.
func startFleet(t *testing.T, n int, mock *clock.Mock, mem *store.Memory, r fixedPeriods) ([]*manager.Manager, []*manager.Breaker) {
	t.Helper()
	ms, bs := fleet(t, n, mock, mem, manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: r})
	syncAll(ms)
	return ms, bs
}

// A manager that did not go through the open state itself (it joined a
// half-open fleet, or heard of an opening whose period was over) takes the
// probe lease for its Recover's probe time, not for a default: a probe that
// hangs holds the fleet for that time only.
func TestSharedJoinerLeaseIsItsProbeTime(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	r := fixedPeriods{open: time.Second, probe: time.Second}
	ms, bs := startFleet(t, 1, mock, mem, r)
	p, err := bs[0].Acquire(context.Background())
	require.NoError(t, err)
	p.Release(errBoom)
	syncAll(ms)
	mock.Add(time.Second)
	syncAll(ms)

	// A replica joins the half-open fleet and probes.
	joined, bj := startFleet(t, 1, mock, mem, r)
	ms = append(ms, joined...)
	require.Equal(t, breaker.HalfOpen, bj[0].State())
	p, err = bj[0].Acquire(context.Background())
	require.NoError(t, err)
	require.True(t, p.Probe())
	syncAll(ms)
	st, err := mem.Status(context.Background(), []string{"svc"})
	require.NoError(t, err)
	assert.Equal(t, r.probe, st[0].Probe, "the lease is the Recover's probe time")
	assert.Equal(t, mock.Now().Add(r.probe), bj[0].Snapshot().Until, "the probe's time is the Recover's")
}

// A manager whose probe's time (and lease) ran out is no longer the
// lease's holder, though its probe's permit is not released yet: refused
// by another manager's lease, it follows that lease, and the lease given
// back (an ignored probe) leaves it half-open its lag later, as the fleet
// is, instead of declining every call until that lease's end.
func TestSharedRanOutProberFollowsAnothersLease(t *testing.T) {
	mock := clock.NewMock()
	ms, bs := startFleet(t, 2, mock, store.NewMemory(mock), fixedPeriods{open: time.Second, probe: time.Second})
	p, err := bs[0].Acquire(context.Background())
	require.NoError(t, err)
	p.Release(errBoom)
	syncAll(ms)
	mock.Add(time.Second)
	syncAll(ms)
	p0, err := bs[0].Acquire(context.Background())
	require.NoError(t, err)
	require.True(t, p0.Probe())
	syncAll(ms)
	mock.Add(time.Second + maxLag) // manager 0's lease runs out, and manager 1's lag after it; its probe never answers
	syncAll(ms)
	require.Equal(t, breaker.HalfOpen, bs[0].State())
	p1, err := bs[1].Acquire(context.Background())
	require.NoError(t, err)
	require.True(t, p1.Probe())
	syncAll(ms)
	_, err = bs[0].Acquire(context.Background())
	require.ErrorIs(t, err, breaker.ErrOpen, "manager 1 holds the lease")
	syncAll(ms)

	p1.ReleaseOutcome(classify.Ignore) // the lease is given back: the fleet is half-open
	syncAll(ms)
	assert.Equal(t, breaker.HalfOpen, bs[1].State(), "the process that gave it back is half-open at once: it asks first")
	assert.Equal(t, breaker.Probing, bs[0].State(), "manager 0 follows the lease given back its lag later")
	mock.Add(maxLag)
	syncAll(ms)
	assert.Equal(t, breaker.HalfOpen, bs[0].State(), "manager 0 follows the lease given back")
	p, err = bs[0].Acquire(context.Background())
	if assert.NoError(t, err, "manager 0's caller may probe") {
		assert.True(t, p.Probe())
	}
}

// resolveThenSync is the memory store, with a hook run after each
// Resolve, before the manager that called it goes on: it makes an
// interleaving the manager's loop may make by itself.
type resolveThenSync struct {
	*store.Memory
	after func()
}

func (r *resolveThenSync) Resolve(ctx context.Context, name, token string, epoch uint64, o classify.Outcome, reopen time.Duration, why store.Reason) (store.Status, bool, error) {
	st, applied, err := r.Memory.Resolve(ctx, name, token, epoch, o, reopen, why)
	if r.after != nil {
		r.after()
	}
	return st, applied, err
}

// A probe's success or ignore is applied in the store before the breaker
// changes here, and the store delivers its change to this process's watch
// before Resolve returns. Even when the loop takes that change before the
// caller applies the verdict (here made certain by a Sync in between; the
// loop may do it by itself on a busy machine), the breaker moves by the
// probe's verdict (cause probe, with its outcome), and the probe's release
// is not stale.
func TestSharedProbeVerdictBeforeItsOwnChange(t *testing.T) {
	for _, tc := range []struct {
		outcome classify.Outcome
		to      breaker.State
	}{{classify.Success, breaker.Closed}, {classify.Ignore, breaker.HalfOpen}} {
		t.Run(tc.outcome.String(), func(t *testing.T) {
			pf := startHookedProber(t)
			m, b, hooked, ms, p := pf.m, pf.b, pf.hooked, pf.ms, pf.probe
			events, unsubscribe := m.Subscribe(16)
			defer unsubscribe()

			hooked.after = m.Sync
			p.ReleaseOutcome(tc.outcome)
			hooked.after = nil
			syncAll(ms)
			require.Equal(t, tc.to, b.State())
			evs := drain(events)
			require.NotEmpty(t, evs)
			last := evs[len(evs)-1]
			assert.Equal(t, breaker.Transition{From: breaker.Probing, To: tc.to}, last.Transition)
			assert.Equal(t, breaker.CauseProbe, last.Cause, "the probe's verdict moved the breaker")
			assert.Equal(t, tc.outcome, last.Outcome)
			assert.Zero(t, b.Stats().Stale, "the probe's release is not stale")
		})
	}
}

// hookedProber is a fleet of two managers on a memory store whose first,
// m, reaches the store through hooked and holds the probe's permit.
type hookedProber struct {
	m      *manager.Manager
	b      *manager.Breaker
	hooked *resolveThenSync
	ms     []*manager.Manager // both managers, the other first
	others []*manager.Breaker // the other manager's breaker
	probe  manager.Permit
}

// startHookedProber trips the fleet through m, lets the open period end
// and takes the probe on m.
func startHookedProber(t *testing.T) hookedProber {
	t.Helper()
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	pf := hookedProber{hooked: &resolveThenSync{Memory: mem}}
	pf.m = manager.Start(manager.Options{Clock: mock, Logger: quietLogger, Resync: time.Hour})
	t.Cleanup(pf.m.Stop)
	var err error
	pf.b, err = pf.m.Register("svc", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: fixedPeriods{open: time.Second, probe: time.Second}, Store: pf.hooked})
	require.NoError(t, err)
	pf.ms, pf.others = startFleet(t, 1, mock, mem, fixedPeriods{open: time.Second, probe: time.Second})
	pf.ms = append(pf.ms, pf.m)

	p, err := pf.b.Acquire(context.Background())
	require.NoError(t, err)
	p.Release(errBoom)
	syncAll(pf.ms)
	mock.Add(time.Second)
	syncAll(pf.ms)
	pf.probe, err = pf.b.Acquire(context.Background())
	require.NoError(t, err)
	require.True(t, pf.probe.Probe())
	syncAll(pf.ms)
	return pf
}

// While a caller applies its probe's verdict, its manager's loop follows
// no store change of the breaker, so that the verdict's own change does not
// move it first. A change another manager makes in that window (here a
// ForceOpen, made certain to fall in it by the hook) waits for the verdict
// and is followed then, not dropped until the next resync.
func TestSharedChangeDuringAVerdictIsFollowed(t *testing.T) {
	pf := startHookedProber(t)
	m, b, hooked, ms, others, p := pf.m, pf.b, pf.hooked, pf.ms, pf.others, pf.probe

	hooked.after = func() {
		// The probe closed the fleet; another manager forces it open
		// before the prober has applied its verdict.
		require.NoError(t, others[0].ForceOpen())
		m.Sync()
	}
	p.Release(nil)
	hooked.after = nil
	syncAll(ms)
	s := b.Snapshot()
	assert.Equal(t, breaker.Open, s.State, "the prober follows the forcing it heard of")
	assert.True(t, s.Forced)
}

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

// letThrough acquires a permit that must be granted, and says whether it is
// the probe.
func letThrough(t *testing.T, b *manager.Breaker, step string) manager.Permit {
	t.Helper()
	p, err := b.Acquire(context.Background())
	require.NoError(t, err, "%s: a breaker in a dry run declines no call (%v)", step, b.State())
	return p
}

// A breaker in a dry run opens after its threshold, with its events, and
// still admits every call, counting the ones it would have declined; those
// calls' outcomes change nothing. Its probe is still one call, whose
// outcome decides.
func TestDryRunOpensAndAdmitsEveryCall(t *testing.T) {
	m, mock := startMock(t)
	events, stop := m.Subscribe(64)
	defer stop()
	b := register(t, m, "pay", manager.Config{
		Strategy: breaker.Consecutive{Failures: 3},
		Recover:  recover.BasicTimeout{Open: time.Second},
		DryRun:   true,
	})
	fail(t, b, 3)
	m.Sync()
	requireState(t, b, breaker.Open, "after its threshold")
	evs := drain(events)
	require.Len(t, evs, 1)
	assert.Equal(t, breaker.Transition{From: breaker.Closed, To: breaker.Open}, evs[0].Transition)
	assert.Same(t, errBoom, evs[0].Err)

	for i := range 5 {
		p := letThrough(t, b, "open")
		assert.False(t, p.Probe())
		if i%2 == 0 {
			p.Release(errBoom)
		} else {
			p.Release(nil)
		}
	}
	m.Sync()
	requireState(t, b, breaker.Open, "after the calls it let through")
	st := b.Stats()
	assert.Equal(t, uint64(5), st.WouldDecline)
	assert.Zero(t, st.Declined)
	assert.Equal(t, uint64(8), st.Calls, "3 that tripped it and 5 let through")
	assert.Zero(t, st.Stale)
	assert.Empty(t, drain(events), "the calls let through make no transition")

	advance(m, mock, time.Second)
	pr := probe(t, b)
	other := letThrough(t, b, "probing")
	assert.False(t, other.Probe(), "the probe is one call; the others pass")
	other.Release(errBoom)
	m.Sync()
	requireState(t, b, breaker.Probing, "a failure let through while probing changes nothing")
	pr.Release(nil)
	m.Sync()
	requireState(t, b, breaker.Closed, "the probe's success closes it")
	assert.Equal(t, uint64(6), b.Stats().WouldDecline)

	// Forced open, a dry run declines nothing either.
	require.NoError(t, b.ForceOpen())
	letThrough(t, b, "forced open").Release(nil)
	assert.Equal(t, uint64(7), b.Stats().WouldDecline)
}

// Reconfigure turns a dry run off, and on: the breaker then declines, or
// lets through, the calls of the open period it is in.
func TestDryRunReconfigured(t *testing.T) {
	m, _ := startMock(t)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: time.Minute}, DryRun: true}
	b := register(t, m, "pay", cfg)
	fail(t, b, 1)
	m.Sync()
	letThrough(t, b, "dry run").Release(nil)

	cfg.DryRun = false
	require.NoError(t, b.Reconfigure(cfg))
	declined(t, b)
	cfg.DryRun = true
	require.NoError(t, b.Reconfigure(cfg))
	letThrough(t, b, "dry run again").Release(nil)
	st := b.Stats()
	assert.Equal(t, uint64(2), st.WouldDecline)
	assert.Equal(t, uint64(1), st.Declined)
}

// A shared breaker in a dry run stays dry: its failures do not count for
// the fleet, its trip opens it alone (the store stays closed and the
// enforcing processes let calls through), its probe takes no lease; it
// follows the fleet's own opening, and still declines nothing.
func TestDryRunShared(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 2}, Recover: recover.BasicTimeout{Open: time.Second, ProbeTimeout: time.Minute}}
	ms, bs := namedFleet(t, mock, mem, cfg, "web-7", "web-9")
	dry := cfg
	dry.DryRun = true
	dms, dbs := namedFleet(t, mock, mem, dry, "web-8")
	ms, bs = append(ms, dms...), append(bs, dbs...)
	dr := bs[2]
	status := func() store.Status {
		st, err := mem.Status(context.Background(), []string{"svc"})
		require.NoError(t, err)
		return st[0]
	}

	fail(t, dr, 2) // the dry run trips on its own count
	syncAll(ms)
	requireState(t, dr, breaker.Open, "the dry run opened, alone")
	assert.Equal(t, uint64(0), status().Epoch, "the store stays closed")
	for i, b := range bs[:2] {
		requireState(t, b, breaker.Closed, "an enforcing process after the dry run's trip")
		letThrough(t, b, "an enforcing process").Release(nil)
		assert.Zero(t, b.Stats().Declined, "enforcing process %d declined nothing", i)
	}
	letThrough(t, dr, "open alone").Release(errBoom)
	assert.Equal(t, uint64(1), dr.Stats().WouldDecline)

	mock.Add(time.Second)
	syncAll(ms)
	requireState(t, dr, breaker.HalfOpen, "the dry run's own period ended")
	p := probe(t, dr)
	syncAll(ms)
	assert.Zero(t, status().Probe, "the dry run's probe takes no lease")
	p.Release(errBoom) // a failed probe of its own: open again, alone
	syncAll(ms)
	requireState(t, dr, breaker.Open, "the dry run's failed probe")
	assert.Equal(t, uint64(0), status().Epoch, "still closed in the store")

	// One failure of an enforcing process: the dry run's do not count.
	fail(t, bs[0], 1)
	syncAll(ms)
	requireState(t, bs[0], breaker.Closed, "one failure of the fleet's own")
	// Two: the fleet opens, and the dry run follows it.
	fail(t, bs[1], 1)
	syncAll(ms)
	for i, b := range bs {
		requireState(t, b, breaker.Open, "the fleet opened: process "+[]string{"web-7", "web-9", "web-8"}[i])
	}
	declined(t, bs[0])
	letThrough(t, dr, "the fleet is open").Release(nil)

	mock.Add(time.Second + maxLag)
	syncAll(ms)
	requireState(t, dr, breaker.HalfOpen, "the dry run follows the fleet's period")
	dp := probe(t, dr) // the dry run's call comes first: a probe of its own
	syncAll(ms)
	assert.Zero(t, status().Probe, "the dry run took no lease")
	ep := probe(t, bs[0]) // so an enforcing process still gets the fleet's
	syncAll(ms)
	assert.Positive(t, status().Probe, "the enforcing process holds the lease")
	dp.Release(nil)
	ep.Release(nil)
	syncAll(ms)
	for i, b := range bs {
		requireState(t, b, breaker.Closed, "the fleet closed on the enforcing probe: process "+[]string{"web-7", "web-9", "web-8"}[i])
	}
}

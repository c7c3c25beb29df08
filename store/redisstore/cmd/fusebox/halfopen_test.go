package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// half-open ends the open period for every process of three: each turns
// half-open, one trial runs for the fleet, and its success closes them
// into the slow start. A breaker that is not open, or is forced, is
// refused with exit status 1 and the reason.
func TestHalfOpenCommand(t *testing.T) {
	srv := redistest.Start(t)
	ps := fleet(t, srv.Addr(), "payments", 3, manager.Config{
		Strategy:  breaker.Consecutive{Failures: 1},
		Recover:   recover.BasicTimeout{Open: time.Hour, ProbeTimeout: 10 * time.Second},
		SlowStart: 5 * time.Second,
	})
	r := fusebox("-redis", srv.Addr(), "half-open", "payments")
	require.Equal(t, 1, r.code, "half-open of a breaker the store holds nothing of: %s", r.stdout)
	assert.Contains(t, r.stderr, `no such breaker "payments"`)

	ps[0].trip(t)
	for _, p := range ps {
		waitFor(t, 5*time.Second, "the fleet opens", func() bool { return p.b.State() == breaker.Open })
	}
	r = fusebox("-redis", srv.Addr(), "half-open", "payments")
	require.Equal(t, 0, r.code, "half-open: %s", r.stderr)
	assert.Regexp(t, `(?m)^state +half_open`, r.stdout, "what the store says after")
	assert.Regexp(t, `(?m)^epoch +3$`, r.stdout)
	for _, p := range ps {
		waitFor(t, 5*time.Second, "the fleet follows the half-open", func() bool { return p.b.State() == breaker.HalfOpen })
	}
	r = fusebox("-redis", srv.Addr(), "half-open", "payments")
	require.Equal(t, 1, r.code, "half-open again: %s", r.stdout)
	assert.Contains(t, r.stderr, "half_open already")

	var trials atomic.Int32
	var probe manager.Permit
	for _, p := range ps {
		if pm, err := p.b.Acquire(context.Background()); err == nil {
			trials.Add(1)
			probe = pm
		}
	}
	require.Equal(t, int32(1), trials.Load(), "one trial for the fleet")
	probe.Release(nil)
	for _, p := range ps {
		waitFor(t, 5*time.Second, "the fleet closes", func() bool { return p.b.State() == breaker.Closed })
		assert.NotNil(t, p.b.Snapshot().SlowStart, "the slow start follows the trial")
	}
	r = fusebox("-redis", srv.Addr(), "half-open", "payments")
	require.Equal(t, 1, r.code, "half-open of a closed breaker: %s", r.stdout)
	assert.Contains(t, r.stderr, "closed, not open")

	require.Equal(t, 0, fusebox("-redis", srv.Addr(), "force-open", "payments").code)
	r = fusebox("-redis", srv.Addr(), "half-open", "payments")
	require.Equal(t, 1, r.code, "half-open of a forced breaker: %s", r.stdout)
	assert.Contains(t, r.stderr, "only reset lifts a force-open")
}

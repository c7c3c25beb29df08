package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// After a recovery with a slow start, show says what is left of the
// fleet's slow start, in text and in JSON.
func TestShowSlowStart(t *testing.T) {
	srv := redistest.Start(t)
	ps := fleet(t, srv.Addr(), "payments", 2, manager.Config{
		Strategy:  breaker.Consecutive{Failures: 1},
		Recover:   recover.BasicTimeout{Open: 100 * time.Millisecond, ProbeTimeout: time.Minute},
		SlowStart: time.Minute,
	})
	ps[0].trip(t)
	waitFor(t, 5*time.Second, "the period ends", func() bool { return ps[1].b.State() == breaker.HalfOpen })
	p, err := ps[1].b.Acquire(context.Background())
	require.NoError(t, err)
	require.True(t, p.Probe())
	p.Release(nil)
	ps[1].m.Sync()

	r := fusebox("-redis", srv.Addr(), "show", "payments")
	require.Equal(t, 0, r.code, "show: %s", r.stderr)
	assert.Regexp(t, `(?m)^state +closed$`, r.stdout)
	assert.Regexp(t, `(?m)^period left +-$`, r.stdout)
	assert.Regexp(t, `(?m)^slow start +(5\d(\.\d)?s|1m) left `, r.stdout)

	r = fusebox("-redis", srv.Addr(), "-json", "show", "payments")
	require.Equal(t, 0, r.code, "show -json: %s", r.stderr)
	var o struct {
		State       string `json:"state"`
		OpenMS      int64  `json:"open_ms"`
		SlowStartMS int64  `json:"slow_start_ms"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &o), r.stdout)
	assert.Equal(t, "closed", o.State)
	assert.Zero(t, o.OpenMS)
	assert.True(t, o.SlowStartMS > 50_000 && o.SlowStartMS <= 60_000, "slow_start_ms %d", o.SlowStartMS)
}

package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

// TestDryRunStaysDry: one process in a dry run and two enforcing ones
// share a breaker through a real redis-server. The dry run's trip, its
// periods and its probes, over a second of calls, make neither enforcing
// process decline one call, and leave the store closed; its failures do
// not count for the fleet. The fleet's own opening, by the enforcing
// processes, is followed by the dry run, which still declines nothing.
func TestDryRunStaysDry(t *testing.T) {
	srv := redistest.Start(t)
	errDown := errors.New("down")
	var bs []*manager.Breaker
	var st *redisstore.Store
	for i := range 3 {
		m := manager.Start(manager.Options{Logger: quiet, Name: fmt.Sprintf("web-%d", i)})
		t.Cleanup(m.Stop)
		st = redisstore.New(newClient(t, srv), redisstore.Options{})
		b, err := m.Register("svc", manager.Config{
			Strategy: breaker.Consecutive{Failures: 2},
			Recover:  recover.BasicTimeout{Open: 100 * time.Millisecond, ProbeTimeout: time.Second},
			Store:    st,
			DryRun:   i == 2,
		})
		require.NoError(t, err)
		m.Sync()
		bs = append(bs, b)
	}
	dry := bs[2]
	ctx := context.Background()
	status := func() (s struct{ Epoch uint64 }) {
		got, err := st.Status(ctx, []string{"svc"})
		require.NoError(t, err)
		s.Epoch = got[0].Epoch
		return s
	}

	// The dry run fails every call for a second: it trips, opens alone,
	// probes alone and fails, again and again.
	opened := false
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		p, err := dry.Acquire(ctx)
		require.NoError(t, err, "a dry run declines nothing")
		p.Release(errDown)
		opened = opened || dry.State() != breaker.Closed
		for i, b := range bs[:2] {
			p, err := b.Acquire(ctx)
			require.NoError(t, err, "enforcing process %d declined a call during the dry run's trips (%v)", i, b.State())
			p.Release(nil)
		}
	}
	require.True(t, opened, "the dry run opened on its own failures")
	assert.NotZero(t, dry.Stats().WouldDecline, "the dry run counted the calls it would have declined")
	assert.Equal(t, uint64(0), status().Epoch, "the store never opened")
	for i, b := range bs[:2] {
		assert.Zero(t, b.Stats().Declined, "enforcing process %d", i)
	}

	// The fleet's own failures open it; the dry run follows.
	for _, b := range bs[:2] {
		p, err := b.Acquire(ctx)
		require.NoError(t, err)
		p.Release(errDown)
	}
	waitFor(t, 5*time.Second, "the fleet opens on the enforcing processes' failures", func() bool {
		return status().Epoch%2 == 1
	})
	for _, b := range bs {
		waitFor(t, 5*time.Second, "every process follows the fleet's opening", func() bool { return b.State() != breaker.Closed })
	}
	p, err := dry.Acquire(ctx)
	require.NoError(t, err, "the dry run still declines nothing")
	p.Release(nil)
}

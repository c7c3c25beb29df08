package manager_test

import (
	"context"
	"errors"
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

// lateGrants is a store whose lease replies come back late on the mock
// clock, after the store granted them: a congested link, a stalled
// process.
type lateGrants struct {
	*store.Memory
	mock *clock.Mock
	late time.Duration
}

func (s *lateGrants) AcquireProbe(ctx context.Context, name, token string, epoch uint64, lease time.Duration) (bool, store.Status, error) {
	won, st, err := s.Memory.AcquireProbe(ctx, name, token, epoch, lease)
	s.mock.Add(s.late)
	return won, st, err
}

// At most one trial at a time, and none after its lease's end: a process
// whose lease comes back granted after the lease could have ended (350ms
// late for a lease of 200ms) makes no trial, since another process may
// hold the next lease by then. On 19f756c it made its trial, with a
// probing deadline already past.
func TestSharedNoTrialAfterTheLeaseEnds(t *testing.T) {
	for _, c := range []struct {
		name string
		late time.Duration
		want bool // a trial
	}{
		{"the grant in time", 150 * time.Millisecond, true},
		{"the grant after the lease", 350 * time.Millisecond, false},
		{"the grant at the lease's end", 200 * time.Millisecond, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			mock := clock.NewMock()
			mem := store.NewMemory(mock)
			m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, Resync: time.Hour, Name: "slow"})
			t.Cleanup(m.Stop)
			b := register(t, m, "svc", manager.Config{
				Strategy: breaker.Consecutive{Failures: 1},
				Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: 200 * time.Millisecond},
				Store:    &lateGrants{Memory: mem, mock: mock, late: c.late},
			})
			release(t, b, errBoom)
			m.Sync()
			require.Equal(t, breaker.Open, b.State())
			mock.Add(time.Second)
			m.Sync()
			require.Equal(t, breaker.HalfOpen, b.State())

			p, err := b.Acquire(context.Background())
			if !c.want {
				require.Error(t, err, "a trial %v after asking for a lease of 200ms", c.late)
				assert.True(t, errors.Is(err, breaker.ErrOpen), "declined: %v", err)
				assert.False(t, p.Probe())
				return
			}
			require.NoError(t, err)
			assert.True(t, p.Probe(), "the grant came back %v after asking: the trial goes ahead", c.late)
			p.Release(nil)
			m.Sync()
			assert.Equal(t, breaker.Closed, b.State())
		})
	}
}

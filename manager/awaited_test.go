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

// deadOpener is the store of a process that dies as it reports the
// threshold's failure: its opening never reaches the store.
type deadOpener struct{ *store.Memory }

func (deadOpener) Open(context.Context, string, uint64, time.Duration, store.Reason) (store.Status, bool, error) {
	return store.Status{}, false, errors.New("the opener died")
}

// The fleet opens within a bound of the threshold's crossing, even when
// the crosser dies before it opens the store and the open period (100ms)
// is shorter than the wait for its opening (300ms): the process that
// awaits the opening opens the store itself once its own period ends. On
// 19f756c it asked for a lease in the still-closed epoch instead, the
// store refused, the breaker closed, and the fleet never opened.
func TestSharedOpensWhenTheCrosserDies(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 2}, Recover: recover.BasicTimeout{Open: 100 * time.Millisecond}}
	start := func(name string, st store.Store) (*manager.Manager, *manager.Breaker) {
		m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, Resync: time.Hour, Name: name})
		t.Cleanup(m.Stop)
		c := cfg
		c.Store = st
		return m, register(t, m, "svc", c)
	}
	m0, crosser := start("crosser", deadOpener{mem})
	m1, other := start("other", mem)
	all := []*manager.Manager{m0, m1}

	release(t, other, errBoom) // the run: 1
	syncAll(all)
	release(t, crosser, errBoom) // 2: crossed; its opening never arrives
	syncAll(all)
	require.Equal(t, breaker.Open, crosser.State())
	release(t, other, errBoom) // 3: crossed before this one, so it awaits the crosser's opening
	syncAll(all)
	require.Equal(t, breaker.Open, other.State())
	st, err := mem.Status(context.Background(), []string{"svc"})
	require.NoError(t, err)
	require.False(t, st[0].Opened(), "the store is not open yet: %+v", st[0])

	mock.Add(100 * time.Millisecond) // its own period ends before the 300ms wait
	syncAll(all)
	require.Equal(t, breaker.HalfOpen, other.State())
	_, err = other.Acquire(context.Background())
	require.Error(t, err, "the first caller opens the store, and is declined")
	syncAll(all)
	st, err = mem.Status(context.Background(), []string{"svc"})
	require.NoError(t, err)
	assert.True(t, st[0].Opened(), "the fleet opened: %+v", st[0])
	assert.Equal(t, "other", st[0].Reason.By, "opened by the process that awaited")

	// The next caller takes the lease of the opened epoch: one trial.
	mock.Add(time.Millisecond)
	syncAll(all)
	p, err := other.Acquire(context.Background())
	require.NoError(t, err, "the next caller is the probe")
	assert.True(t, p.Probe())
	p.Release(nil)
	syncAll(all)
	assert.Equal(t, breaker.Closed, other.State())
}

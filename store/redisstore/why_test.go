package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/reasontext"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

// On a real Redis, every other process of the fleet says who opened a
// shared breaker and why: its event (heard through pub/sub), its declined
// calls' OpenError.Cause and its Stats; a process that joins later reads
// it in the status; a failed probe says who probed and why.
func TestFleetSaysWhoOpenedAndWhy(t *testing.T) {
	srv := redistest.Start(t)
	cfg := manager.Config{
		Strategy: breaker.Consecutive{Failures: 2},
		Recover:  recover.BasicTimeout{Open: 200 * time.Millisecond, ProbeTimeout: time.Minute},
	}
	web7 := startPeer(t, srv.Addr(), "pay", cfg, manager.Options{Name: "web-7"})
	web8 := startPeer(t, srv.Addr(), "pay", cfg, manager.Options{Name: "web-8"})
	events, stop := web8.m.Subscribe(64)
	defer stop()

	refused := errors.New("dial tcp 10.0.0.7:443: connect:\nconnection refused")
	for range 2 {
		p, err := web7.b.Acquire(context.Background())
		require.NoError(t, err)
		p.Release(refused)
	}
	web7.m.Sync()
	const want = "opened by web-7: dial tcp 10.0.0.7:443: connect: connection refused"
	var opened manager.Event
	waitFor(t, 5*time.Second, "web-8 follows the opening", func() bool {
		for {
			select {
			case ev := <-events:
				if ev.Transition.To == breaker.Open {
					opened = ev
					return true
				}
			default:
				return false
			}
		}
	})
	require.Error(t, opened.Err, "the event of web-8's opening")
	assert.Equal(t, want, opened.Err.Error(), "one line, with its opener")
	var oe *breaker.OpenedError
	require.ErrorAs(t, opened.Err, &oe)
	assert.Equal(t, "web-7", oe.By)

	_, err := web8.b.Acquire(context.Background())
	var de *breaker.OpenError
	require.ErrorAs(t, err, &de, "web-8 declines")
	require.NotNil(t, de.Cause)
	assert.Equal(t, want, de.Cause.Error())
	st := web8.b.Stats()
	assert.Equal(t, "web-7", st.OpenedBy)
	assert.Equal(t, "dial tcp 10.0.0.7:443: connect: connection refused", st.Cause)

	sts, err := web8.st.Status(context.Background(), []string{"pay"})
	require.NoError(t, err)
	assert.Equal(t, store.Reason{By: "web-7", Why: "dial tcp 10.0.0.7:443: connect: connection refused"}, sts[0].Reason, "the status read")

	late := startPeer(t, srv.Addr(), "pay", cfg, manager.Options{Name: "web-9"})
	late.m.Sync()
	assert.Equal(t, "web-7", late.b.Stats().OpenedBy, "a process that joins later reads who")

	// The period ends; web-8 probes and fails: web-7 hears who and why.
	events7, stop7 := web7.m.Subscribe(64)
	defer stop7()
	var probe manager.Permit
	waitFor(t, 5*time.Second, "web-8 takes the probe", func() bool {
		p, err := web8.b.Acquire(context.Background())
		if err != nil {
			return false
		}
		probe = p
		return true
	})
	require.True(t, probe.Probe())
	probe.Release(errors.New("GET /pay: 503 " + strings.Repeat("x", 300)))
	web8.m.Sync()
	waitFor(t, 5*time.Second, "web-7 follows the failed probe", func() bool {
		for {
			select {
			case ev := <-events7:
				if ev.Transition.To == breaker.Open && ev.Err != nil && strings.HasPrefix(ev.Err.Error(), "opened by web-8: GET /pay: 503 x") {
					opened = ev
					return true
				}
			default:
				return false
			}
		}
	})
	require.ErrorAs(t, opened.Err, &oe)
	assert.LessOrEqual(t, len(oe.Text), reasontext.Max, "the store keeps a bounded text")
	assert.True(t, strings.HasSuffix(oe.Text, "..."), "a cut text ends with ...: %q", oe.Text)
}

package manager_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/reasontext"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

var (
	errDial = errors.New("dial tcp 10.0.0.7:443: connect: connection refused")
	err503  = errors.New("GET /pay: 503 Service Unavailable")
)

// openings returns the events of transitions to open among evs.
func openings(evs []manager.Event) []manager.Event {
	var out []manager.Event
	for _, ev := range evs {
		if ev.Kind == manager.EventTransition && ev.Transition.To == breaker.Open {
			out = append(out, ev)
		}
	}
	return out
}

// A local breaker's opening says why: its event carries the error of the
// call that tripped it, or of the probe that failed, and so do Stats and
// the declined calls' OpenError, until the breaker closes.
func TestEventErrOfALocalOpening(t *testing.T) {
	m, mock := startMock(t)
	events, stop := m.Subscribe(64)
	defer stop()
	b := register(t, m, "pay", manager.Config{
		Strategy: breaker.Consecutive{Failures: 2},
		Recover:  recover.BasicTimeout{Open: time.Second},
	})
	release(t, b, errors.New("first"))
	release(t, b, errDial)
	m.Sync()
	evs := drain(events)
	require.Len(t, openings(evs), 1, "events %v", evs)
	assert.Same(t, errDial, openings(evs)[0].Err, "the trip's event")
	st := b.Stats()
	assert.Equal(t, errDial.Error(), st.Cause, "Stats.Cause while open")
	assert.Empty(t, st.OpenedBy, "a local breaker names no process")
	assert.Same(t, errDial, declined(t, b).Cause)

	advance(m, mock, time.Second)
	assert.Equal(t, errDial.Error(), b.Stats().Cause, "Stats.Cause while half-open: the opening it recovers from")
	for _, ev := range drain(events) {
		assert.Nil(t, ev.Err, "the event of %v", ev.Transition)
	}
	probe(t, b).Release(err503)
	m.Sync()
	evs = drain(events)
	require.Len(t, openings(evs), 1, "events %v", evs)
	assert.Same(t, err503, openings(evs)[0].Err, "the failed probe's event")
	assert.Equal(t, err503.Error(), b.Stats().Cause)

	advance(m, mock, time.Second)
	probe(t, b).Release(nil)
	m.Sync()
	for _, ev := range drain(events) {
		assert.Nil(t, ev.Err, "the event of %v", ev.Transition)
	}
	st = b.Stats()
	assert.Equal(t, breaker.Closed, st.State)
	assert.Empty(t, st.Cause, "closed: no cause")
}

// Stats.Cause is one line and bounded, whatever the error: a multi-line
// error of 1,000 bytes (an HTTP body, say).
func TestStatsCauseIsOneBoundedLine(t *testing.T) {
	m, _ := startMock(t)
	b := register(t, m, "pay", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	long := errors.New("upstream said:\n" + strings.Repeat("é", 500))
	release(t, b, long)
	m.Sync()
	c := b.Stats().Cause
	assert.LessOrEqual(t, len(c), reasontext.Max)
	assert.NotContains(t, c, "\n")
	assert.True(t, strings.HasPrefix(c, "upstream said: é"), "got %q", c)
	assert.True(t, strings.HasSuffix(c, "..."), "a cut text ends with ...: %q", c)
}

// namedFleet starts managers of the given names on one mock clock, each
// with a breaker "svc" shared through st.
func namedFleet(t *testing.T, mock *clock.Mock, st store.Store, cfg manager.Config, names ...string) ([]*manager.Manager, []*manager.Breaker) {
	t.Helper()
	cfg.Store = st
	var ms []*manager.Manager
	var bs []*manager.Breaker
	for _, n := range names {
		m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, Resync: time.Hour, Name: n})
		t.Cleanup(m.Stop)
		ms = append(ms, m)
		bs = append(bs, register(t, m, "svc", cfg))
	}
	return ms, bs
}

// A shared breaker's opening says who and why in every process: the
// other process's event, its declined calls' OpenError.Cause and its Stats
// say "opened by web-7: <the error>"; a failed probe of web-8 says so in
// web-7.
func TestSharedOpeningSaysWhoAndWhy(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	ms, bs := namedFleet(t, mock, mem, manager.Config{
		Strategy: breaker.Consecutive{Failures: 2},
		Recover:  recover.BasicTimeout{Open: time.Second},
	}, "web-7", "web-8")
	var subs []<-chan manager.Event
	for _, m := range ms {
		ch, stop := m.Subscribe(64)
		t.Cleanup(stop)
		subs = append(subs, ch)
	}

	fail(t, bs[0], 1)
	release(t, bs[0], errDial)
	syncAll(ms)
	want := "opened by web-7: " + errDial.Error()

	mine := openings(drain(subs[0]))
	require.Len(t, mine, 1)
	assert.Same(t, errDial, mine[0].Err, "the opener's own event carries its error")
	theirs := openings(drain(subs[1]))
	require.Len(t, theirs, 1)
	var oe *breaker.OpenedError
	require.ErrorAs(t, theirs[0].Err, &oe, "the other process's event")
	assert.Equal(t, breaker.OpenedError{By: "web-7", Text: errDial.Error()}, *oe)
	assert.Equal(t, want, theirs[0].Err.Error())

	d := declined(t, bs[1])
	assert.Equal(t, want, d.Cause.Error(), "OpenError.Cause in the other process")
	assert.Contains(t, d.Error(), ", "+want)
	for i, b := range bs {
		st := b.Stats()
		assert.Equal(t, "web-7", st.OpenedBy, "Stats.OpenedBy of manager %d", i)
		assert.Equal(t, errDial.Error(), st.Cause, "Stats.Cause of manager %d", i)
	}
	assert.Equal(t, store.Reason{By: "web-7", Why: errDial.Error()}, sharedStatusOf(t, mem).Reason, "the store")

	// web-8 probes, and its probe fails: web-7 says so.
	mock.Add(time.Second + maxLag)
	syncAll(ms)
	probe(t, bs[1]).Release(err503)
	syncAll(ms)
	theirs = openings(drain(subs[0]))
	require.Len(t, theirs, 1, "web-7 follows the failed probe")
	assert.Equal(t, "opened by web-8: "+err503.Error(), theirs[0].Err.Error())
	st := bs[0].Stats()
	assert.Equal(t, "web-8", st.OpenedBy)
	assert.Equal(t, err503.Error(), st.Cause)
	assert.Equal(t, store.Reason{By: "web-8", Why: err503.Error()}, sharedStatusOf(t, mem).Reason)

	// The fleet closes: no reason left anywhere.
	mock.Add(time.Second + maxLag)
	syncAll(ms)
	probe(t, bs[0]).Release(nil)
	syncAll(ms)
	for i, b := range bs {
		st := b.Stats()
		assert.Equal(t, breaker.Closed, st.State, "manager %d", i)
		assert.Empty(t, st.Cause+st.OpenedBy, "manager %d", i)
	}
	assert.Equal(t, store.Reason{}, sharedStatusOf(t, mem).Reason)
}

// A manager that joins a fleet whose breaker is open learns who opened
// it and why from the store's status.
func TestSharedJoinerLearnsWhoAndWhy(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: time.Minute}}
	ms, bs := namedFleet(t, mock, mem, cfg, "web-7")
	release(t, bs[0], errDial)
	syncAll(ms)
	late, lbs := namedFleet(t, mock, mem, cfg, "web-9")
	syncAll(late)
	require.Equal(t, breaker.Open, lbs[0].State())
	st := lbs[0].Stats()
	assert.Equal(t, "web-7", st.OpenedBy)
	assert.Equal(t, errDial.Error(), st.Cause)
	assert.Equal(t, "opened by web-7: "+errDial.Error(), declined(t, lbs[0]).Cause.Error())
}

func sharedStatusOf(t *testing.T, st store.Store) store.Status {
	t.Helper()
	s, err := st.Status(context.Background(), []string{"svc"})
	require.NoError(t, err)
	return s[0]
}

// named is a store that records the names a manager gives it: the
// reporters of its failures and the tokens of its probe leases.
type named struct {
	store.Store
	mu        sync.Mutex
	reporters []string
	tokens    []string
}

func (s *named) RecordFailure(ctx context.Context, name string, p store.Policy, failures int64, n []int64) (store.Verdict, error) {
	s.mu.Lock()
	s.reporters = append(s.reporters, p.Reporter)
	s.mu.Unlock()
	return s.Store.RecordFailure(ctx, name, p, failures, n)
}

func (s *named) AcquireProbe(ctx context.Context, name, token string, epoch uint64, lease time.Duration) (bool, store.Status, error) {
	s.mu.Lock()
	s.tokens = append(s.tokens, token)
	s.mu.Unlock()
	return s.Store.AcquireProbe(ctx, name, token, epoch, lease)
}

// Options.Name is the quorum's reporter and the probe lease's holder; each
// lease's token is its own.
func TestOptionsNameNamesReporterAndHolder(t *testing.T) {
	mock := clock.NewMock()
	st := &named{Store: store.NewMemory(mock)}
	ms, bs := namedFleet(t, mock, st, manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second},
		Quorum:   1,
	}, "web-7")
	assert.Equal(t, "web-7", ms[0].Name())
	for range 2 {
		fail(t, bs[0], 1)
		syncAll(ms)
		mock.Add(time.Second + maxLag)
		syncAll(ms)
		probe(t, bs[0]).Release(nil)
		syncAll(ms)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	assert.Equal(t, []string{"web-7", "web-7"}, st.reporters)
	require.Len(t, st.tokens, 2)
	for _, tok := range st.tokens {
		assert.True(t, strings.HasPrefix(tok, "web-7/"), "token %q names its holder", tok)
	}
	assert.NotEqual(t, st.tokens[0], st.tokens[1], "each lease's token is its own")
}

// The default name is the host name, with a number after it while
// another manager of the process holds the host name alone.
func TestOptionsNameDefault(t *testing.T) {
	host, err := os.Hostname()
	require.NoError(t, err)
	a := manager.Start(manager.Options{Logger: quietLogger})
	defer a.Stop()
	b := manager.Start(manager.Options{Logger: quietLogger})
	defer b.Stop()
	prefix := host
	for _, n := range []string{a.Name(), b.Name()} {
		assert.True(t, n == prefix || strings.HasPrefix(n, prefix+"-"), "default name %q starts with %q", n, prefix)
	}
	assert.NotEqual(t, a.Name(), b.Name(), "two managers of a process have names of their own")
}

// A name that would not print as itself on one line is refused: a shared
// breaker cannot register, with an error that names the field; a local
// one can.
func TestOptionsNameRefused(t *testing.T) {
	for _, name := range []string{"web 7", "web\n7", strings.Repeat("w", 129), "web-\x007", "\xff"} {
		m := manager.Start(manager.Options{Logger: quietLogger, Name: name})
		_, err := m.Register("svc", manager.Config{Store: store.NewMemory(nil)})
		require.Error(t, err, "name %q", name)
		assert.Contains(t, err.Error(), `breaker "svc"`, "name %q", name)
		assert.Contains(t, err.Error(), "Options.Name", "name %q", name)
		_, err = m.Register("local", manager.Config{})
		assert.NoError(t, err, "a local breaker does not use the name %q", name)
		m.Stop()
	}
}

// A slow call that returned no error still says why it opened the breaker.
func TestEventErrOfASlowCall(t *testing.T) {
	m, mock := startMock(t)
	events, stop := m.Subscribe(64)
	defer stop()
	b := register(t, m, "replica", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second},
		SlowCall: 800 * time.Millisecond,
	})
	slow := func(context.Context) error { mock.Add(time.Second); return nil }
	require.NoError(t, b.Do(context.Background(), slow))
	m.Sync()
	evs := openings(drain(events))
	require.Len(t, evs, 1)
	var se *manager.SlowCallError
	require.ErrorAs(t, evs[0].Err, &se)
	assert.Equal(t, manager.SlowCallError{Took: time.Second, SlowCall: 800 * time.Millisecond}, *se)
	assert.Equal(t, "fusebox: slow call: took 1s, at least Config.SlowCall (800ms)", b.Stats().Cause)
	assert.Contains(t, declined(t, b).Error(), "opened by: slow call: took 1s")

	// The probe, slow too: its failure says so.
	mock.Add(time.Second + maxLag)
	m.Sync()
	p := probe(t, b)
	mock.Add(900 * time.Millisecond)
	p.Release(nil)
	m.Sync()
	evs = openings(drain(events))
	require.Len(t, evs, 1)
	require.ErrorAs(t, evs[0].Err, &se)
	assert.Equal(t, 900*time.Millisecond, se.Took)
}

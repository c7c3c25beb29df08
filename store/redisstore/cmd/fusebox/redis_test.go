package main

// These tests run the command line against a real redis-server, with a
// fleet of real managers making the state it reads and following what it
// does.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

func newClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
}

// fleet starts n peers, processes web-0, web-1, ..., sharing the breaker
// name through the server at addr.
func fleet(t *testing.T, addr, name string, n int, cfg manager.Config) []*peer {
	var ps []*peer
	for i := range n {
		ps = append(ps, startNamedPeer(t, newClient(addr), fmt.Sprintf("web-%d", i), name, cfg))
	}
	return ps
}

// A breaker tripped by one process of three shows as open, with its
// epoch, what is left of its period, and who opened it and why; its show
// says the same in full.
func TestListOpen(t *testing.T) {
	srv := redistest.Start(t)
	ps := fleet(t, srv.Addr(), "payments", 3, manager.Config{
		Strategy: breaker.Consecutive{Failures: 3},
		Recover:  recover.BasicTimeout{Open: time.Minute},
	})
	ps[0].trip(t)

	r := fusebox("-redis", srv.Addr(), "list")
	require.Equal(t, 0, r.code, "list: %s", r.stderr)
	assert.Equal(t, []string{"NAME", "STATE", "EPOCH", "SINCE", "PERIOD", "LEFT", "PERIOD", "ENDS", "PROBE", "HELD", "BY", "LEASE", "LEFT", "FAILURES", "CALLS", "PROCESSES", "WHY"}, strings.Fields(lines(r.stdout)[0]), "the header")
	f := row(r.stdout, "payments")
	require.NotNil(t, f, "a line for payments in\n%s", r.stdout)
	assert.Equal(t, []string{"payments", "open", "1"}, f[:3], "name, state, epoch")
	left, err := time.ParseDuration(f[4])
	require.NoError(t, err, "the period left, %q", f[4])
	assert.True(t, left > 50*time.Second && left <= time.Minute, "the period left, %v, is nearly the minute it opened for", left)
	assertTimeOfDay(t, f[5], time.Now().Add(left), "the period's end")
	assert.Equal(t, []string{"-", "-", "3", "-", "-"}, f[6:11], "no lease; the three failures that tripped it; no quorum")
	assert.Equal(t, "opened by web-0: boom", strings.Join(f[11:], " "), "who opened it, and why")

	r = fusebox("-redis", srv.Addr(), "show", "payments")
	require.Equal(t, 0, r.code, "show: %s", r.stderr)
	assert.Regexp(t, `(?m)^state +open$`, r.stdout)
	assert.Regexp(t, `(?m)^epoch +1$`, r.stdout)
	assert.Regexp(t, `(?m)^period left +(5\d(\.\d)?s|1m)$`, r.stdout)
	assert.Regexp(t, `(?m)^period ends +\d\d:\d\d:\d\d$`, r.stdout)
	assert.Regexp(t, `(?m)^why +opened by web-0: boom \(3 consecutive failures\)$`, r.stdout)
	assert.Regexp(t, `(?m)^probe lease +none$`, r.stdout)
	assert.Regexp(t, `(?m)^counts +3 consecutive failures$`, r.stdout)
	assert.Regexp(t, `(?m)^keys +fusebox:\{payments\}:\*$`, r.stdout)

	r = fusebox("-redis", srv.Addr(), "-json", "show", "payments")
	require.Equal(t, 0, r.code, "show -json: %s", r.stderr)
	var o breakerObject
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &o), "one JSON object: %s", r.stdout)
	assert.Equal(t, breakerObject{Name: "payments", State: "open", Epoch: 1, Since: o.Since, OpenMS: o.OpenMS, PeriodEnds: o.PeriodEnds, Failures: 3, OpenedBy: "web-0", Why: "boom"}, o)
	since, err := time.Parse(time.RFC3339, o.Since)
	require.NoError(t, err, "since is RFC 3339, from the since key the opening wrote: %q", o.Since)
	assert.WithinDuration(t, time.Now(), since, 10*time.Second, "since: the opening, a moment ago")
	assert.Greater(t, o.OpenMS, int64(50_000))
	end, err := time.Parse(time.RFC3339, o.PeriodEnds)
	require.NoError(t, err, "period_ends is RFC 3339: %q", o.PeriodEnds)
	assert.WithinDuration(t, time.Now().Add(time.Duration(o.OpenMS)*time.Millisecond), end, time.Second, "period_ends is now plus open_ms")
}

// A breaker whose period is over shows as half_open; once a process takes
// the probe, as probing, with the lease's holder (the process's name, the
// start of the token in the store) and what is left of the lease; the
// probe's success closes it.
func TestListProbing(t *testing.T) {
	srv := redistest.Start(t)
	ps := fleet(t, srv.Addr(), "payments", 3, manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: 100 * time.Millisecond, ProbeTimeout: time.Minute},
	})
	ps[0].trip(t)
	waitFor(t, 5*time.Second, "the period ends", func() bool {
		f := row(fusebox("-redis", srv.Addr(), "list").stdout, "payments")
		return f != nil && f[1] == "half_open"
	})

	var probe manager.Permit
	waitFor(t, 5*time.Second, "a process takes the probe", func() bool {
		p, err := ps[1].b.Acquire(context.Background())
		if err != nil {
			return false
		}
		require.True(t, p.Probe(), "the call let through a half-open breaker is the probe")
		probe = p
		return true
	})
	token, err := newClientFor(t, srv.Addr()).Get(context.Background(), "fusebox:{payments}:probe").Result()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(token, "web-1/"), "the lease's token %q starts with its holder's name", token)
	const holder = "web-1"

	r := fusebox("-redis", srv.Addr(), "list")
	require.Equal(t, 0, r.code, "list: %s", r.stderr)
	f := row(r.stdout, "payments")
	require.NotNil(t, f, "a line for payments in\n%s", r.stdout)
	assert.Equal(t, []string{"payments", "probing", "1"}, f[:3], "name, state, epoch")
	assertTimeOfDay(t, f[3], time.Now(), "since: the lease, a moment ago")
	assert.Equal(t, []string{"-", "-", holder}, f[4:7], "no period, the lease's holder")
	lease, err := time.ParseDuration(f[7])
	require.NoError(t, err, "the lease left, %q", f[7])
	assert.True(t, lease > 50*time.Second && lease <= time.Minute, "the lease left, %v, is nearly its minute", lease)

	r = fusebox("-redis", srv.Addr(), "show", "payments")
	m := regexp.MustCompile(`(?m)^probe lease +held by ` + holder + `, (5\d(\.\d)?s|1m) left \(ends (\d\d:\d\d:\d\d)\)$`).FindStringSubmatch(r.stdout)
	if assert.NotNil(t, m, "the probe lease, its holder, what is left and when it ends, in\n%s", r.stdout) {
		assertTimeOfDay(t, m[3], time.Now().Add(lease), "the lease's end")
	}

	probe.Release(nil)
	waitFor(t, 5*time.Second, "the probe's success closes it", func() bool {
		f := row(fusebox("-redis", srv.Addr(), "list").stdout, "payments")
		return f != nil && f[1] == "closed" && f[2] == "2"
	})
}

func newClientFor(t *testing.T, addr string) *redis.Client {
	c := newClient(addr)
	t.Cleanup(func() { c.Close() })
	return c
}

// force-open from the command line is followed by every process of the
// fleet, with an event of cause shared, as a manager's ForceOpen is; reset
// likewise lifts it.
func TestForceOpenAndReset(t *testing.T) {
	srv := redistest.Start(t)
	ps := fleet(t, srv.Addr(), "payments", 3, manager.Config{Strategy: breaker.Consecutive{Failures: 5}})
	events, unsubscribe := ps[2].m.Subscribe(16)
	defer unsubscribe()

	r := fusebox("-redis", srv.Addr(), "force-open", "payments")
	require.Equal(t, 0, r.code, "force-open: %s", r.stderr)
	assert.Regexp(t, `(?m)^state +forced$`, r.stdout, "what the store says after")
	assert.Regexp(t, `(?m)^period left +until reset$`, r.stdout)
	assert.Contains(t, r.stderr, `the store held nothing of "payments" before`, "a note: the name may be a typo")
	for _, p := range ps {
		waitFor(t, 5*time.Second, "the fleet follows the force-open", func() bool {
			p.m.Sync()
			s := p.b.Snapshot()
			return s.State == breaker.Open && s.Forced
		})
	}
	ev := nextEvent(t, events)
	assert.Equal(t, breaker.CauseShared, ev.Cause, "the event of a forcing from the command line")
	assert.Equal(t, breaker.Transition{From: breaker.Closed, To: breaker.Open}, ev.Transition)

	r = fusebox("-redis", srv.Addr(), "reset", "payments")
	require.Equal(t, 0, r.code, "reset: %s", r.stderr)
	assert.Regexp(t, `(?m)^state +closed$`, r.stdout, "what the store says after")
	assert.Regexp(t, `(?m)^epoch +2$`, r.stdout)
	assert.Empty(t, r.stderr, "no note: the store knew the breaker")
	for _, p := range ps {
		waitFor(t, 5*time.Second, "the fleet follows the reset", func() bool {
			p.m.Sync()
			s := p.b.Snapshot()
			return s.State == breaker.Closed && !s.Forced
		})
	}
	ev = nextEvent(t, events)
	assert.Equal(t, breaker.CauseShared, ev.Cause, "the event of a reset from the command line")
	assert.Equal(t, breaker.Transition{From: breaker.Open, To: breaker.Closed}, ev.Transition)
}

func nextEvent(t *testing.T, events <-chan manager.Event) manager.Event {
	t.Helper()
	select {
	case ev := <-events:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return manager.Event{}
}

// watch prints a line for a change a manager makes, and ends with status
// 0 when interrupted; with -json, a JSON object a change.
func TestWatch(t *testing.T) {
	srv := redistest.Start(t)
	ps := fleet(t, srv.Addr(), "payments", 1, manager.Config{
		Strategy: breaker.Consecutive{Failures: 2},
		Recover:  recover.BasicTimeout{Open: 30 * time.Second},
	})
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			args := []string{"-redis", srv.Addr(), "watch"}
			if format == "json" {
				args = append(args, "-json")
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out, errs buffer
			code := make(chan int, 1)
			go func() { code <- run(ctx, args, &out, &errs) }()
			waitFor(t, 5*time.Second, "watch subscribes", func() bool { return strings.Contains(errs.String(), "watching fusebox:changes") })

			require.NoError(t, ps[0].b.Reset())
			ps[0].trip(t)
			waitFor(t, 5*time.Second, "watch prints the opening", func() bool { return strings.Contains(out.String(), "opened") })
			interrupt(t, cancel, code, &errs)
			got := lines(out.String())
			if format == "json" {
				require.Len(t, got, 2, "a reset and an opening:\n%s", out.String())
				var o changeObject
				require.NoError(t, json.Unmarshal([]byte(got[1]), &o))
				assert.Equal(t, "opened", o.Kind)
				assert.Equal(t, "payments", o.Name)
				assert.Equal(t, "web-0", o.OpenedBy)
				assert.Equal(t, "boom", o.Why)
				assert.InDelta(t, 30_000, o.OpenMS, 1000, "the period it opened for, in milliseconds")
				assert.WithinDuration(t, time.Now(), o.At, 10*time.Second)
				return
			}
			require.Len(t, got, 3, "a header, a reset and an opening:\n%s", out.String())
			assert.Equal(t, []string{"TIME", "KIND", "EPOCH", "PERIOD", "NAME"}, strings.Fields(got[0]))
			assert.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3} +reset +\d+ +- +payments$`, got[1])
			assert.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3} +opened +\d+ +30s +payments  \(opened by web-0: boom\)$`, got[2])
		})
	}
}

// A breaker the store holds nothing of is an error that names it.
func TestShowUnknown(t *testing.T) {
	srv := redistest.Start(t)
	r := fusebox("-redis", srv.Addr(), "show", "paymnts")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `no such breaker "paymnts"`)
	assert.Empty(t, r.stdout)

	r = fusebox("-redis", srv.Addr(), "list")
	assert.Equal(t, result{0, "no breaker has state in the store\n", ""}, r)
	r = fusebox("-redis", srv.Addr(), "-json", "list")
	assert.Equal(t, result{0, "", ""}, r, "no breaker, no JSON line")
}

// A Redis that cannot be reached is an error that names its address.
func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close() // nothing listens there now

	for _, command := range [][]string{{"list"}, {"show", "payments"}, {"force-open", "payments"}, {"reset", "payments"}, {"watch"}} {
		t.Run(command[0], func(t *testing.T) {
			t.Parallel() // each waits out the client's dial retries
			r := fusebox(append([]string{"-redis", "redis://" + addr, "-timeout", "2s"}, command...)...)
			assert.Equal(t, 1, r.code, "exit status")
			assert.Contains(t, r.stderr, "fusebox: Redis unreachable at "+addr+": ")
			assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line on stderr: %s", r.stderr)
			assert.Empty(t, r.stdout)
		})
	}
}

// A server that stops answering ends a command at -timeout, with an
// error saying so.
func TestTimeout(t *testing.T) {
	srv := redistest.Start(t)
	srv.Pause()
	start := time.Now()
	r := fusebox("-redis", srv.Addr(), "-timeout", "300ms", "list")
	assert.Less(t, time.Since(start), 3*time.Second, "the command ends about its timeout")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "fusebox: Redis unreachable at "+srv.Addr()+": no answer within 300ms (-timeout)")
}

// A watch whose connection drops ends with status 1, saying so: a gap in
// what it printed is never silent.
func TestWatchLost(t *testing.T) {
	srv := redistest.Start(t)
	var out, errs buffer
	code := make(chan int, 1)
	go func() { code <- run(context.Background(), []string{"-redis", srv.Addr(), "watch"}, &out, &errs) }()
	waitFor(t, 5*time.Second, "watch subscribes", func() bool { return strings.Contains(errs.String(), "watching fusebox:changes") })
	srv.Kill()
	select {
	case c := <-code:
		assert.Equal(t, 1, c, "exit status of a watch whose server died")
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not end within 10s of its server's death")
	}
	assert.Regexp(t, `fusebox: redisstore: watch fusebox:changes: .+ \(Redis at `+srv.Addr()+`\)\n$`, errs.String())
}

// Under a quorum, list and show say how many processes the failures came
// from: one replica alone opens only itself, and the store shows its
// failures as one process's.
func TestListProcessesInTheCount(t *testing.T) {
	srv := redistest.Start(t)
	ps := fleet(t, srv.Addr(), "search", 3, manager.Config{
		Strategy: breaker.Consecutive{Failures: 3},
		Recover:  recover.BasicTimeout{Open: time.Minute},
		Quorum:   2,
	})
	ps[0].trip(t)
	require.Equal(t, breaker.Open, ps[0].b.State(), "the replica opens alone")
	require.Equal(t, breaker.Closed, ps[1].b.State(), "the fleet does not")

	r := fusebox("-redis", srv.Addr(), "list")
	require.Equal(t, 0, r.code, "list: %s", r.stderr)
	f := row(r.stdout, "search")
	require.NotNil(t, f, "a line for search in\n%s", r.stdout)
	assert.Equal(t, []string{"search", "closed"}, f[:2], "the fleet is closed")
	assert.Equal(t, "1", f[10], "the failures come from one process")
	assert.Equal(t, "-", f[11], "the fleet is closed: no opener")

	err := ps[1].b.Do(context.Background(), func(context.Context) error { return errBoom })
	require.ErrorIs(t, err, errBoom)
	r = fusebox("-redis", srv.Addr(), "show", "search")
	require.Equal(t, 0, r.code, "show: %s", r.stderr)
	assert.Regexp(t, `(?m)^counts +\d+ consecutive failures, from 2 processes: web-0, web-1$`, r.stdout)
}

// interrupt cancels a watch's context, as SIGINT does, and checks that the
// watch ends within 5s with exit status 0.
func interrupt(t *testing.T, cancel context.CancelFunc, code <-chan int, errs *buffer) {
	t.Helper()
	cancel()
	select {
	case c := <-code:
		assert.Equal(t, 0, c, "exit status of an interrupted watch; stderr: %s", errs.String())
	case <-time.After(5 * time.Second):
		t.Fatal("watch did not end within 5s of its interruption")
	}
}

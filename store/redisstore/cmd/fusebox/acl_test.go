package main

import (
	"context"
	"os"
	"path/filepath"
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
	"github.com/fusebox-go/fusebox/store/redisstore"
)

// aclUsers returns the ACL SETUSER commands docs/shared-state.md gives,
// by user, each user's password placeholder (FLEET_PASSWORD, ...)
// replaced by the user's name: the test runs what the guide says.
func aclUsers(t *testing.T) map[string][]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "shared-state.md"))
	require.NoError(t, err)
	users := map[string][]any{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "ACL SETUSER ") {
			continue
		}
		var args []any
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, ">") && strings.HasSuffix(f, "_PASSWORD") {
				f = ">" + strings.Fields(line)[2]
			}
			args = append(args, f)
		}
		users[args[2].(string)] = args
	}
	require.Len(t, users, 3, "docs/shared-state.md gives the ACL of fusebox-fleet, fusebox-reader and fusebox-operator")
	return users
}

// A fleet runs as the ACL user the guide gives it: two managers share a
// breaker through a trip, its open period, a probe and a closing, with no
// store error (a command the user may not run would be one). The command
// line runs as the read-only user (list, show, watch), which cannot
// force-open, reset or forget; and as the operator, which can.
func TestACL(t *testing.T) {
	srv := redistest.Start(t)
	admin := newClientFor(t, srv.Addr())
	ctx := context.Background()
	for name, args := range aclUsers(t) {
		require.NoError(t, admin.Do(ctx, args...).Err(), "ACL SETUSER %s", name)
	}
	as := func(user string) *redis.Client {
		return redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: user, Password: user, ContextTimeoutEnabled: true})
	}
	url := func(user string) string { return "redis://" + user + ":" + user + "@" + srv.Addr() }
	require.Error(t, as("fusebox-reader").Set(ctx, "fusebox:{x}:epoch", 1, 0).Err(), "the reader cannot write")

	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Recover: recover.BasicTimeout{Open: 300 * time.Millisecond}}
	ps := []*peer{startPeer(t, as("fusebox-fleet"), "payments", cfg), startPeer(t, as("fusebox-fleet"), "payments", cfg)}
	state := func(p *peer) breaker.State {
		p.m.Sync()
		return p.b.State()
	}

	var out, errs buffer
	wctx, cancel := context.WithCancel(ctx)
	code := make(chan int, 1)
	go func() { code <- run(wctx, []string{"-redis", url("fusebox-reader"), "watch"}, &out, &errs) }()
	waitFor(t, 5*time.Second, "the reader's watch subscribes", func() bool { return strings.Contains(errs.String(), "watching") })

	ps[0].trip(t)
	waitFor(t, 5*time.Second, "the other process follows the opening", func() bool { return state(ps[1]) == breaker.Open })
	r := fusebox("-redis", url("fusebox-reader"), "list")
	require.Equal(t, 0, r.code, "list as the reader: %s", r.stderr)
	assert.Equal(t, []string{"payments", "open"}, row(r.stdout, "payments")[:2], "list as the reader:\n%s", r.stdout)
	r = fusebox("-redis", url("fusebox-reader"), "show", "payments")
	require.Equal(t, 0, r.code, "show as the reader: %s", r.stderr)
	assert.Regexp(t, `(?m)^state +open$`, r.stdout)

	waitFor(t, 5*time.Second, "the open period ends", func() bool { return state(ps[1]) == breaker.HalfOpen })
	p, err := ps[1].b.Acquire(ctx)
	require.NoError(t, err, "the probe")
	require.True(t, p.Probe(), "the first call after the period is the probe")
	p.Release(nil)
	for i, pr := range ps {
		waitFor(t, 5*time.Second, "the fleet closes", func() bool { return state(pr) == breaker.Closed })
		assert.Zero(t, pr.b.Stats().StoreErrors, "process %d: no store call was refused", i)
	}
	waitFor(t, 5*time.Second, "the reader's watch prints the opening and the closing", func() bool {
		return strings.Contains(out.String(), "opened") && strings.Contains(out.String(), "closed")
	})
	cancel()
	assert.Equal(t, 0, <-code, "the watch ends when interrupted: %s", errs.String())

	// A window strategy's script counts in a hash by the server's TIME.
	window := manager.Config{Strategy: breaker.TimeWindow{Rate: 0.5, Period: 10 * time.Second, MinCalls: 4}, Recover: recover.BasicTimeout{Open: time.Minute}}
	var search []*manager.Breaker
	for _, p := range ps {
		c := as("fusebox-fleet")
		t.Cleanup(func() { c.Close() })
		window.Store = redisstore.New(c, redisstore.Options{})
		b, err := p.m.Register("search", window)
		require.NoError(t, err)
		search = append(search, b)
	}
	for range 2 {
		for _, b := range search {
			_ = b.Do(ctx, func(context.Context) error { return errBoom })
		}
	}
	for i, p := range ps {
		waitFor(t, 5*time.Second, "the window trips the fleet", func() bool {
			p.m.Sync()
			return search[i].State() == breaker.Open
		})
		assert.Zero(t, search[i].Stats().StoreErrors, "process %d: no store call of the window was refused", i)
	}

	for _, command := range [][]string{{"force-open", "payments"}, {"reset", "payments"}, {"forget", "payments"}} {
		r := fusebox(append([]string{"-redis", url("fusebox-reader")}, command...)...)
		assert.Equal(t, 1, r.code, "%s as the reader: %s", command[0], r.stdout)
		assert.Contains(t, r.stderr, "NOPERM", "%s as the reader", command[0])
	}
	assert.Equal(t, breaker.Closed, state(ps[0]), "the reader changed nothing")

	r = fusebox("-redis", url("fusebox-operator"), "force-open", "payments")
	require.Equal(t, 0, r.code, "force-open as the operator: %s", r.stderr)
	waitFor(t, 5*time.Second, "the fleet follows the operator's force-open", func() bool { return state(ps[1]) == breaker.Open })
	r = fusebox("-redis", url("fusebox-operator"), "reset", "payments")
	require.Equal(t, 0, r.code, "reset as the operator: %s", r.stderr)
	waitFor(t, 5*time.Second, "the fleet follows the operator's reset", func() bool { return state(ps[1]) == breaker.Closed })
	for i, pr := range ps {
		assert.Zero(t, pr.b.Stats().StoreErrors, "process %d: no store call was refused", i)
	}
}

// On a Redis Cluster the fleet's user needs what the guide adds for one:
// the layout (CLUSTER SLOTS or SHARDS) and each master's INFO server. A
// fleet runs there, as that user on every node, through a trip and a
// closing on the shard channels, with no store error.
func TestACLCluster(t *testing.T) {
	addrs := redistest.StartCluster(t, 3)
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "shared-state.md"))
	require.NoError(t, err)
	extra := regexp.MustCompile("On a Redis Cluster, add `([^`]+)`").FindStringSubmatch(strings.Join(strings.Fields(string(raw)), " "))
	require.NotNil(t, extra, "docs/shared-state.md says what to add on a Cluster")
	ctx := context.Background()
	fleetUser := aclUsers(t)["fusebox-fleet"]
	for _, f := range strings.Fields(extra[1]) {
		fleetUser = append(fleetUser, f)
	}
	for _, addr := range addrs {
		admin := newClientFor(t, addr)
		require.NoError(t, admin.Do(ctx, fleetUser...).Err(), "ACL SETUSER on %s", addr)
	}
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Recover: recover.BasicTimeout{Open: 300 * time.Millisecond}}
	var ps []*peer
	for range 2 {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Username: "fusebox-fleet", Password: "fusebox-fleet", ContextTimeoutEnabled: true})
		ps = append(ps, startPeer(t, c, "payments", cfg))
	}
	state := func(p *peer) breaker.State {
		p.m.Sync()
		return p.b.State()
	}
	ps[0].trip(t)
	waitFor(t, 10*time.Second, "the other process follows the opening", func() bool { return state(ps[1]) == breaker.Open })
	waitFor(t, 10*time.Second, "the open period ends", func() bool { return state(ps[1]) == breaker.HalfOpen })
	p, err := ps[1].b.Acquire(ctx)
	require.NoError(t, err, "the probe")
	p.Release(nil)
	for i, pr := range ps {
		waitFor(t, 10*time.Second, "the fleet closes", func() bool { return state(pr) == breaker.Closed })
		assert.Zero(t, pr.b.Stats().StoreErrors, "process %d: no store call was refused", i)
	}
}

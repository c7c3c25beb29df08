package main

// The command line on a Redis Cluster and through Sentinel, with managers
// on clients of the same kind.

import (
	"context"
	"strings"
	"sync"
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

// On a Cluster, list finds breakers on every master, and force-open and
// reset reach the fleet.
func TestCluster(t *testing.T) {
	addrs := redistest.StartCluster(t, 3)
	flag := strings.Join(addrs, ",")
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: time.Minute}}
	names := []string{"payments", "search", "inventory", "ads", "ledger", "mail"}
	peers := map[string]*peer{}
	for _, n := range names {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
		peers[n] = startPeer(t, c, n, cfg)
		peers[n].trip(t)
	}
	admin := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer admin.Close()
	var mu sync.Mutex
	held := map[string]int64{}
	require.NoError(t, admin.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		mu.Lock()
		defer mu.Unlock()
		held[m.Options().Addr] = n
		return err
	}))
	require.Len(t, held, 3)
	for addr, n := range held {
		require.Positive(t, n, "keys on the master %s: the breakers live on every master", addr)
	}

	r := fusebox("-cluster", flag, "list")
	require.Equal(t, 0, r.code, "list: %s", r.stderr)
	for _, n := range names {
		f := row(r.stdout, n)
		if assert.NotNil(t, f, "a line for %s in\n%s", n, r.stdout) {
			assert.Equal(t, []string{n, "open", "1"}, f[:3], "name, state, epoch")
		}
	}
	assert.Len(t, lines(r.stdout), 1+len(names), "a header and a line per breaker")

	r = fusebox("-cluster", flag, "force-open", "ledger")
	require.Equal(t, 0, r.code, "force-open: %s", r.stderr)
	assert.Regexp(t, `(?m)^state +forced$`, r.stdout)
	waitFor(t, 5*time.Second, "the fleet follows the force-open", func() bool {
		peers["ledger"].m.Sync()
		return peers["ledger"].b.Snapshot().Forced
	})
	r = fusebox("-cluster", flag, "reset", "ledger")
	require.Equal(t, 0, r.code, "reset: %s", r.stderr)
	waitFor(t, 5*time.Second, "the fleet follows the reset", func() bool {
		peers["ledger"].m.Sync()
		return peers["ledger"].b.State() == breaker.Closed
	})

	// The watch says it listens to the shard channels (Redis 7), and
	// hears a change on them.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errs buffer
	code := make(chan int, 1)
	go func() { code <- run(ctx, []string{"-cluster", flag, "watch"}, &out, &errs) }()
	waitFor(t, 5*time.Second, "watch subscribes", func() bool { return strings.Contains(errs.String(), "watching ") })
	assert.Contains(t, errs.String(), "watching the shard channels fusebox:changes:{tag} of every slot on ")
	peers["ledger"].trip(t)
	waitFor(t, 5*time.Second, "watch prints the opening", func() bool { return strings.Contains(out.String(), "ledger") })
	interrupt(t, cancel, code, &errs)
}

// Through Sentinel, the command line finds the master and reads it.
func TestSentinel(t *testing.T) {
	master := redistest.Start(t)
	addr, name := redistest.StartSentinel(t, master)
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: name, SentinelAddrs: []string{addr}, ContextTimeoutEnabled: true})
	p := startPeer(t, c, "payments", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	p.trip(t)

	r := fusebox("-sentinel", name+"@"+addr, "list")
	require.Equal(t, 0, r.code, "list: %s", r.stderr)
	f := row(r.stdout, "payments")
	require.NotNil(t, f, "a line for payments in\n%s", r.stdout)
	assert.Equal(t, []string{"payments", "open", "1"}, f[:3])

	r = fusebox("-sentinel", "nosuchmaster@"+addr, "-timeout", "1s", "list")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `fusebox: Redis master "nosuchmaster" unreachable through the Sentinels at `+addr+": ")
}

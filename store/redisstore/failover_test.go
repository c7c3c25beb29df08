package redisstore_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
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

// failoverRuns is how many failovers TestClusterFailover makes:
// FUSEBOX_FAILOVER_RUNS, or 1.
func failoverRuns(t *testing.T) int {
	n := 1
	if s := os.Getenv("FUSEBOX_FAILOVER_RUNS"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err, "FUSEBOX_FAILOVER_RUNS")
	}
	return n
}

// A Cluster of three masters with a replica each; two managers, each with
// its own Cluster client, share a breaker that is open in the fleet; the
// master of the breaker's slot is killed (SIGKILL). The cluster promotes
// its replica about two seconds later; within 2s of the promotion both
// managers follow the store again (StoreDown is false) and a Reset by one
// reaches the other. It runs with changes on shard channels and on the
// classic channel, and says what the failover cost: the time on the
// fallback, and the commands the surviving nodes ran meanwhile.
func TestClusterFailover(t *testing.T) {
	runs := failoverRuns(t)
	var lines []string
	for _, mode := range []redisstore.Pubsub{redisstore.PubsubSharded, redisstore.PubsubClassic} {
		for run := range runs {
			t.Run(fmt.Sprintf("%v/%d", mode, run), func(t *testing.T) {
				lines = append(lines, fmt.Sprintf("%v %d: %s", mode, run, failoverOnce(t, mode)))
			})
		}
	}
	for _, l := range lines {
		t.Log(l)
	}
}

// failoverOnce makes one failover on a cluster of its own and says what
// it measured.
func failoverOnce(t *testing.T, mode redisstore.Pubsub) string {
	cl := redistest.StartClusterWithReplicas(t, 3, 1, time.Second)
	t.Cleanup(func() { waitClientsIdle(t) }) // after every client is closed
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Recover: recover.BasicTimeout{Open: time.Hour}}
	opts := manager.Options{Logger: quiet, Resync: 200 * time.Millisecond, StoreTimeout: 200 * time.Millisecond}
	// On the classic channel, the breaker lives on the master of that
	// channel's slot, so that the kill ends the watches too, as it does on
	// shard channels.
	name := "svc"
	if mode == redisstore.PubsubClassic {
		st := redisstore.New(nil, redisstore.Options{}) // for its names only
		channelMaster, _ := slotOwners(t, cl, st.Channel())
		for i := 1; ; i++ {
			if m, _ := slotOwners(t, cl, st.Key(name, "epoch")); m == channelMaster {
				break
			}
			name = fmt.Sprintf("svc-%d", i)
		}
	}
	var peers []*clusterPeer
	for range 2 {
		peers = append(peers, startClusterPeer(t, cl.Addrs(), name, cfg, opts, redisstore.Options{Pubsub: mode}))
	}
	a, b := peers[0], peers[1]
	for range 3 {
		_ = a.b.Do(context.Background(), func(context.Context) error { return errBoom })
	}
	require.Equal(t, breaker.Open, a.b.State())
	waitFor(t, 5*time.Second, "the other peer follows the opening", func() bool { return b.b.State() == breaker.Open })

	master, replica := slotOwners(t, cl, a.st.Key(name, "epoch"))
	require.NotEmpty(t, replica, "the master %s of %q has no replica", master, name)
	survivors := map[string]*redis.Client{}
	for _, addr := range cl.Addrs() {
		if addr != master {
			survivors[addr] = redis.NewClient(&redis.Options{Addr: addr})
			defer survivors[addr].Close()
		}
	}
	before := commandCounts(t, survivors)
	killed := time.Now()
	cl.Server(master).Kill()
	for _, p := range peers {
		waitFor(t, 5*time.Second, "the peer falls back", func() bool { return p.b.Stats().StoreDown })
	}
	down := time.Since(killed)

	waitFor(t, 10*time.Second, "the replica is promoted", func() bool {
		role, err := survivors[replica].Do(context.Background(), "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	})
	promoted := time.Now()

	const within = 2 * time.Second
	waitFor(t, 70*time.Second, "both peers follow the store again", func() bool {
		return !a.b.Stats().StoreDown && !b.b.Stats().StoreDown
	})
	back := time.Since(promoted)
	require.NoError(t, a.b.Reset())
	waitFor(t, 70*time.Second, "a Reset by one peer reaches the other", func() bool { return b.b.State() == breaker.Closed })
	reached := time.Since(promoted)
	assert.LessOrEqual(t, reached, within, "from the promotion to a Reset by one peer seen by the other")
	assert.False(t, a.b.Stats().StoreDown || b.b.Stats().StoreDown, "StoreDown after the Reset went through")
	// Both watches subscribed again: the failover is over for the fleet.
	waitFor(t, 10*time.Second, "both watches subscribe again", func() bool {
		var n int64
		for _, c := range survivors {
			var counts map[string]int64
			var err error
			if mode == redisstore.PubsubSharded {
				counts, err = c.PubSubShardNumSub(context.Background(), a.st.ShardChannel(name)).Result()
			} else {
				counts, err = c.PubSubNumSub(context.Background(), a.st.Channel()).Result()
			}
			if err == nil {
				for _, v := range counts {
					n += v
				}
			}
		}
		return n == 2
	})
	over := time.Since(promoted)
	ran := commandCounts(t, survivors)
	for cmd, n := range before {
		ran[cmd] -= n
	}
	return fmt.Sprintf("fallback %v after the kill; promoted %v after the kill; store followed again %v after the promotion; a Reset seen by the other %v after it; both watches subscribed again %v after it; from the kill on, the survivors ran %s",
		down.Round(time.Millisecond), promoted.Sub(killed).Round(time.Millisecond), back.Round(time.Millisecond), reached.Round(time.Millisecond), over.Round(time.Millisecond), describeCommands(ran))
}

// commandCounts sums INFO commandstats's calls by command over nodes, but
// for the test's own (INFO, ROLE, PUBSUB).
func commandCounts(t *testing.T, nodes map[string]*redis.Client) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, c := range nodes {
		info, err := c.Info(context.Background(), "commandstats").Result()
		require.NoError(t, err)
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			cmd, isCmd := strings.CutPrefix(name, "cmdstat_")
			if !ok || !isCmd || cmd == "info" || cmd == "role" || strings.HasPrefix(cmd, "pubsub") {
				continue
			}
			for _, f := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(f, "calls="); ok {
					n, _ := strconv.ParseInt(v, 10, 64)
					out[cmd] += n
				}
			}
		}
	}
	return out
}

// describeCommands lists the commands that ran, most first.
func describeCommands(ran map[string]int64) string {
	var cmds []string
	var total int64
	for cmd, n := range ran {
		if n > 0 {
			cmds = append(cmds, cmd)
			total += n
		}
	}
	slices.SortFunc(cmds, func(x, y string) int { return cmp.Compare(ran[y], ran[x]) })
	var b strings.Builder
	fmt.Fprintf(&b, "%d commands (", total)
	for i, cmd := range cmds {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", cmd, ran[cmd])
	}
	b.WriteString(")")
	return b.String()
}

// clusterPeer is one manager with its own Cluster client.
type clusterPeer struct {
	m  *manager.Manager
	b  *manager.Breaker
	c  *redis.ClusterClient
	st *redisstore.Store
}

func startClusterPeer(t *testing.T, addrs []string, name string, cfg manager.Config, opts manager.Options, sopts redisstore.Options) *clusterPeer {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	st := redisstore.New(c, sopts)
	cfg.Store = st
	m := manager.Start(opts)
	p := &clusterPeer{m: m, c: c, st: st}
	t.Cleanup(func() {
		m.Stop()
		c.Close()
	})
	b, err := m.Register(name, cfg)
	require.NoError(t, err, "Register(%q)", name)
	p.b = b
	m.Sync()
	return p
}

// slotOwners returns the address of the master that serves key's slot, and
// of its replica ("" if it has none).
func slotOwners(t *testing.T, cl *redistest.Cluster, key string) (master, replica string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: cl.Nodes[0].Addr()})
	defer c.Close()
	ctx := context.Background()
	slot, err := c.ClusterKeySlot(ctx, key).Result()
	require.NoError(t, err)
	nodes, err := c.ClusterNodes(ctx).Result()
	require.NoError(t, err)
	// id addr@bus flags master-id ping pong epoch state slot...
	var masterID string
	addrOf := map[string]string{}
	replicaOf := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(line)
		require.GreaterOrEqual(t, len(f), 8, "CLUSTER NODES line %q", line)
		addr, _, _ := strings.Cut(f[1], "@")
		addrOf[f[0]] = addr
		if f[3] != "-" {
			replicaOf[f[3]] = addr
			continue
		}
		for _, r := range f[8:] {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			l, err1 := strconv.ParseInt(lo, 10, 64)
			h, err2 := strconv.ParseInt(hi, 10, 64)
			if err1 == nil && err2 == nil && l <= slot && slot <= h {
				masterID = f[0]
			}
		}
	}
	require.NotEmpty(t, masterID, "no master serves slot %d:\n%s", slot, nodes)
	return addrOf[masterID], replicaOf[masterID]
}

// waitClientsIdle waits, bounded, until no goroutine of a closed go-redis
// client is left: a pool whose dial failed redials every second on a
// goroutine of its own until it sees the pool closed, and a Cluster
// client's state reload runs on one for a 200ms cooldown.
func waitClientsIdle(t *testing.T) {
	t.Helper()
	busy := func() []string {
		buf := make([]byte, 1<<20)
		var left []string
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "pool.(*ConnPool).tryDial") || strings.Contains(g, "clusterStateHolder).LazyReload") {
				left = append(left, g)
			}
		}
		return left
	}
	deadline := time.Now().Add(5 * time.Second)
	for left := busy(); len(left) > 0; left = busy() {
		if time.Now().After(deadline) {
			t.Fatalf("the closed clients' goroutines did not end within 5s:\n%s", strings.Join(left, "\n\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

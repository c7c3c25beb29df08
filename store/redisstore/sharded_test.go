package redisstore_test

// The sharded tests run on one Cluster of three masters with a replica
// each: where each Pubsub mode announces a change, and how many nodes
// carry it.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/store"
	"github.com/fusebox-go/fusebox/store/redisstore"
	"github.com/fusebox-go/fusebox/store/storetest"
)

func newClusterClient(t *testing.T, addrs []string) *redis.ClusterClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestClusterPubsub(t *testing.T) {
	cl := redistest.StartClusterWithReplicas(t, 3, 1, 2*time.Second)
	t.Run("Modes", func(t *testing.T) { pubsubModes(t, cl) })
	t.Run("ClassicConformance", func(t *testing.T) {
		prefix := 0
		storetest.Run(t, storetest.Harness{
			New: func(t *testing.T) store.Store {
				prefix++
				return redisstore.New(newClusterClient(t, cl.Addrs()), redisstore.Options{Prefix: "classic" + strconv.Itoa(prefix), Pubsub: redisstore.PubsubClassic})
			},
			Advance: func(t *testing.T, d time.Duration) {},
			Real:    true,
		})
	})
	t.Run("Carriers", func(t *testing.T) { carriers(t, cl) })
	t.Run("WatchEverySlot", func(t *testing.T) { watchEverySlot(t, cl) })
	t.Run("WatchNames10000", func(t *testing.T) { watchNames10000(t, cl) })
}

// Watch on a Cluster that announces on shard channels subscribes to the
// channel of every slot, on every master, before it calls ready; then it
// hears a change of any breaker, one it never heard of included. What it
// costs: the time to subscribe, the subscriptions, the masters' memory.
func watchEverySlot(t *testing.T, cl *redistest.Cluster) {
	ctx := context.Background()
	c := newClusterClient(t, cl.Addrs())
	st := redisstore.New(c, redisstore.Options{Prefix: "every"})
	before := shardSubscriptions(t, c, "every")
	require.Zero(t, before.channels)
	wctx, cancel := context.WithCancel(ctx)
	ready := make(chan struct{})
	changes := make(chan store.Change, 16)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- st.Watch(wctx, func() { close(ready) }, func(ch store.Change) { changes <- ch }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Watch: %v", err)
	}
	defer func() {
		cancel()
		assert.NoError(t, <-done)
	}()
	took := time.Since(start)
	after := shardSubscriptions(t, c, "every")
	assert.Equal(t, 16384, after.channels, "shard channels subscribed, over the masters")
	for i := range 3 {
		name := fmt.Sprintf("never-heard-of-%d", i)
		_, err := st.ForceOpen(ctx, name)
		require.NoError(t, err)
		select {
		case ch := <-changes:
			assert.Equal(t, store.Change{Name: name, Kind: store.Forced, Epoch: 1}, ch)
		case <-time.After(5 * time.Second):
			t.Fatalf("the forcing of %s was not heard within 5s", name)
		}
	}
	// A second watcher subscribes to channels that exist already.
	second, cancel2 := context.WithCancel(ctx)
	ready2 := make(chan struct{})
	done2 := make(chan error, 1)
	go func() { done2 <- st.Watch(second, func() { close(ready2) }, func(store.Change) {}) }()
	select {
	case <-ready2:
	case err := <-done2:
		t.Fatalf("a second Watch: %v", err)
	}
	more := shardSubscriptions(t, c, "every")
	cancel2()
	assert.NoError(t, <-done2)
	t.Logf("Watch subscribed to %d shard channels on %d masters in %v; the masters' memory grew by %d KiB, and by %d KiB for a second watcher", after.channels, after.masters, took.Round(time.Millisecond), (after.memory-before.memory)/1024, (more.memory-after.memory)/1024)
}

// subscriptions is what a Cluster's masters hold of the shard channels of
// a prefix.
type subscriptions struct {
	masters, channels int
	memory            int64 // used_memory, summed over the masters
}

func shardSubscriptions(t *testing.T, c *redis.ClusterClient, prefix string) subscriptions {
	var mu sync.Mutex
	var out subscriptions
	require.NoError(t, c.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		chans, err := m.PubSubShardChannels(ctx, prefix+":changes:*").Result()
		if err != nil {
			return err
		}
		info, err := m.Info(ctx, "memory").Result()
		if err != nil {
			return err
		}
		var used int64
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				used, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		out.masters++
		out.channels += len(chans)
		out.memory += used
		return nil
	}))
	return out
}

// Which channels a Store announces on, by client and Options.Pubsub: on a
// Cluster of Redis 7, shard channels unless told otherwise; one classic
// channel elsewhere; PubsubSharded only on a Cluster.
func pubsubModes(t *testing.T, cl *redistest.Cluster) {
	single := newClient(t, redistest.Start(t))
	cluster := newClusterClient(t, cl.Addrs())
	tests := []struct {
		name    string
		client  redis.UniversalClient
		pubsub  redisstore.Pubsub
		sharded bool
		err     string
	}{
		{"single server, auto", single, redisstore.PubsubAuto, false, ""},
		{"single server, classic", single, redisstore.PubsubClassic, false, ""},
		{"single server, sharded", single, redisstore.PubsubSharded, false, "needs a Cluster client"},
		{"cluster, auto", cluster, redisstore.PubsubAuto, true, ""},
		{"cluster, classic", cluster, redisstore.PubsubClassic, false, ""},
		{"cluster, sharded", cluster, redisstore.PubsubSharded, true, ""},
		{"cluster, out of range", cluster, redisstore.Pubsub(3), false, "is none of"},
	}
	for _, tt := range tests {
		st := redisstore.New(tt.client, redisstore.Options{Pubsub: tt.pubsub})
		if tt.err != "" {
			if assert.Error(t, st.Err(), tt.name) {
				assert.Contains(t, st.Err().Error(), tt.err, tt.name)
			}
			continue
		}
		require.NoError(t, st.Err(), tt.name)
		sharded, err := st.Sharded(context.Background())
		require.NoError(t, err, tt.name)
		assert.Equal(t, tt.sharded, sharded, "%s: Sharded", tt.name)
	}
}

// carriers makes a change in each mode and counts the nodes that carry
// it, two ways: the cluster bus's own counts of the messages it carried
// (CLUSTER INFO), and a subscriber on every node, each subscribed where
// the store announces (SUBSCRIBE to the classic channel, SSUBSCRIBE to the
// breaker's shard channel: a node outside its slot's shard refuses it).
// Classic PUBLISH reaches every node of the cluster; SPUBLISH the master
// of the breaker's slot and its replica only.
func carriers(t *testing.T, cl *redistest.Cluster) {
	for _, mode := range []redisstore.Pubsub{redisstore.PubsubClassic, redisstore.PubsubSharded} {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := context.Background()
			st := redisstore.New(newClusterClient(t, cl.Addrs()), redisstore.Options{Prefix: "carry-" + mode.String(), Pubsub: mode})
			channel, subscribe := st.Channel(), "subscribe"
			if mode == redisstore.PubsubSharded {
				channel, subscribe = st.ShardChannel("svc"), "ssubscribe"
			}
			nodes := map[string]*redis.Client{}
			for _, addr := range cl.Addrs() {
				nodes[addr] = redis.NewClient(&redis.Options{Addr: addr})
				defer nodes[addr].Close()
			}
			var heard sync.Map // node address -> true, once its subscriber delivered the change
			var refused atomic.Int64
			var wg sync.WaitGroup
			defer wg.Wait()
			for addr, c := range nodes {
				ps := c.Subscribe(ctx)
				if subscribe == "ssubscribe" {
					ps = c.SSubscribe(ctx)
					require.NoError(t, ps.SSubscribe(ctx, channel))
				} else {
					require.NoError(t, ps.Subscribe(ctx, channel))
				}
				defer ps.Close()
				if _, err := ps.Receive(ctx); err != nil {
					require.True(t, redis.HasErrorPrefix(err, "MOVED"), "%s %s on %s: %v", subscribe, channel, addr, err)
					refused.Add(1)
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						msg, err := ps.ReceiveMessage(ctx)
						if err != nil {
							return // closed
						}
						if strings.HasSuffix(msg.Payload, "|svc") {
							heard.Store(addr, true)
						}
					}
				}()
			}

			// The bus may still carry the messages of an earlier change
			// (the classic mode's, a conformance test's): counted from a
			// moment when it did, this change's counts never add up.
			before := quietBus(t, nodes)
			_, err := st.ForceOpen(ctx, "svc")
			require.NoError(t, err)
			var carried map[string]bool
			var sent, received int64
			delivered := 0
			defer func() {
				if t.Failed() {
					t.Logf("last counted: the bus sent %d and received %d messages, %d nodes carried the change, %d subscribers delivered it", sent, received, len(carried), delivered)
				}
			}()
			waitFor(t, 10*time.Second, "the bus delivers what it sent, and every node that received it delivers it to its subscriber", func() bool {
				after := busCounts(t, nodes)
				carried, sent, received = map[string]bool{}, 0, 0
				for addr := range nodes {
					d := after[addr].minus(before[addr])
					sent += d.sent
					received += d.received
					if d.sent+d.received > 0 {
						carried[addr] = true
					}
				}
				delivered = 0
				heard.Range(func(any, any) bool { delivered++; return true })
				return sent > 0 && sent == received && delivered == len(carried)
			})
			heard.Range(func(addr, _ any) bool {
				assert.True(t, carried[addr.(string)], "%s delivered the change without its bus carrying it", addr)
				return true
			})
			t.Logf("%s: a change carried by %d of %d nodes (%d bus messages); %d nodes refused %s %s", mode, len(carried), len(nodes), sent, refused.Load(), subscribe, channel)
			if mode == redisstore.PubsubClassic {
				assert.Len(t, carried, len(nodes), "classic PUBLISH: every node carries the change")
			} else {
				assert.Len(t, carried, 2, "SPUBLISH: the master of the breaker's slot and its replica carry the change")
				assert.Equal(t, int64(len(nodes)-2), refused.Load(), "nodes outside the slot's shard refuse its shard channel")
			}
		})
	}
}

// bus is what a node's cluster bus counted of pub/sub messages.
type bus struct{ sent, received int64 }

func (b bus) minus(o bus) bus { return bus{b.sent - o.sent, b.received - o.received} }

// quietBus waits until every message the cluster bus sent was received
// (the sums over the nodes agree), and returns the counts of that moment.
func quietBus(t *testing.T, nodes map[string]*redis.Client) map[string]bus {
	t.Helper()
	var counts map[string]bus
	waitFor(t, 10*time.Second, "the cluster bus received every message it sent", func() bool {
		counts = busCounts(t, nodes)
		var sum bus
		for _, b := range counts {
			sum.sent += b.sent
			sum.received += b.received
		}
		return sum.sent == sum.received
	})
	return counts
}

// busCounts reads CLUSTER INFO's counts of PUBLISH and SPUBLISH messages
// on each node's cluster bus.
func busCounts(t *testing.T, nodes map[string]*redis.Client) map[string]bus {
	out := map[string]bus{}
	for addr, c := range nodes {
		info, err := c.ClusterInfo(context.Background()).Result()
		require.NoError(t, err)
		var b bus
		for _, line := range strings.Split(info, "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "cluster_stats_messages_publish_sent", "cluster_stats_messages_publishshard_sent":
				b.sent += n
			case "cluster_stats_messages_publish_received", "cluster_stats_messages_publishshard_received":
				b.received += n
			}
		}
		out[addr] = b
	}
	return out
}

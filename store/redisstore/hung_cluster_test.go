package redisstore_test

import (
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

// While a master of a Cluster hangs (its process stopped with SIGSTOP), a
// manager whose watch holds shard channels on it stops within about one
// StoreTimeout, and so does one that starts then and is subscribing to the
// 16,384 channels: each subscription command has its deadline, and a
// subscription's reads end when the watch closes it.
func TestClusterHungBoundedWaits(t *testing.T) {
	cl := redistest.StartClusterWithReplicas(t, 3, 0, 2*time.Second)
	const timeout = 100 * time.Millisecond
	const bound = 1500 * time.Millisecond
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 100}, Recover: recover.BasicTimeout{Open: time.Minute}}
	start := func() *manager.Manager {
		st := redisstore.New(newClusterClient(t, cl.Addrs()), redisstore.Options{SubscribeTimeout: timeout, Pubsub: redisstore.PubsubSharded})
		m := manager.Start(manager.Options{Logger: quiet, StoreTimeout: timeout})
		c := cfg
		c.Store = st
		_, err := m.Register("svc", c)
		require.NoError(t, err)
		return m
	}
	watching := start()
	watching.Sync() // subscribed

	master, _ := slotOwners(t, cl, redisstore.New(nil, redisstore.Options{}).Key("svc", "epoch"))
	cl.Server(master).Pause()
	defer cl.Server(master).Resume()
	subscribing := start()

	for name, m := range map[string]*manager.Manager{"a manager whose watch is in place": watching, "a manager whose watch is subscribing": subscribing} {
		began := time.Now()
		m.Stop()
		took := time.Since(began)
		t.Logf("Stop of %s: %v", name, took)
		assert.Less(t, took, bound, "Stop of %s while a master hangs (StoreTimeout and SubscribeTimeout %v)", name, timeout)
	}
}

package redisstore_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/store"
	"github.com/fusebox-go/fusebox/store/redisstore"
	"github.com/fusebox-go/fusebox/store/storetest"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	goleak.VerifyTestMain(m)
}

func newClient(t *testing.T, srv *redistest.Server) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestRedisConformance(t *testing.T) {
	srv := redistest.Start(t)
	prefix := 0
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) store.Store {
			prefix++ // a fresh key space per scenario
			return redisstore.New(newClient(t, srv), redisstore.Options{Prefix: "t" + strconv.Itoa(prefix)})
		},
		Advance: func(t *testing.T, d time.Duration) {},
		Real:    true,
	})
}

func TestRedisClusterConformance(t *testing.T) {
	addrs := redistest.StartCluster(t, 3)
	prefix := 0
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) store.Store {
			prefix++
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
			t.Cleanup(func() { c.Close() })
			return redisstore.New(c, redisstore.Options{Prefix: "c" + strconv.Itoa(prefix)})
		},
		Advance: func(t *testing.T, d time.Duration) {},
		Real:    true,
	})
}

func TestRedisFailoverConformance(t *testing.T) {
	master := redistest.Start(t)
	sentinel, name := redistest.StartSentinel(t, master)
	prefix := 0
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) store.Store {
			prefix++
			c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: name, SentinelAddrs: []string{sentinel}})
			t.Cleanup(func() { c.Close() })
			return redisstore.New(c, redisstore.Options{Prefix: "f" + strconv.Itoa(prefix)})
		},
		Advance: func(t *testing.T, d time.Duration) {},
		Real:    true,
	})
}

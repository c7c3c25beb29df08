package redisstore_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/store"
	"github.com/fusebox-go/fusebox/store/redisstore"
	"github.com/fusebox-go/fusebox/store/storetest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	if os.Getenv(soakMemberEnv) != "" {
		os.Exit(soakMemberMain())
	}
	goleak.VerifyTestMain(m)
}

func newClient(t *testing.T, srv *redistest.Server) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
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
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
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
			c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: name, SentinelAddrs: []string{sentinel}, ContextTimeoutEnabled: true})
			t.Cleanup(func() { c.Close() })
			return redisstore.New(c, redisstore.Options{Prefix: "f" + strconv.Itoa(prefix)})
		},
		Advance: func(t *testing.T, d time.Duration) {},
		Real:    true,
	})
}

// A Store built with bad options, or a name whose keys cannot share one
// slot, is an error at Register that names the breaker and the problem,
// never a silent fallback.
func TestRedisRefusedAtRegister(t *testing.T) {
	srv := redistest.Start(t)
	good := newClient(t, srv)
	tests := []struct {
		name  string
		store *redisstore.Store
		bname string
		want  string
	}{
		{"nil client", redisstore.New(nil, redisstore.Options{}), "svc", "the client is nil"},
		{"prefix with braces", redisstore.New(good, redisstore.Options{Prefix: "a{b}"}), "svc", "must not contain '{' or '}'"},
		{"negative FailureTTL", redisstore.New(good, redisstore.Options{FailureTTL: -time.Second}), "svc", "FailureTTL must not be negative"},
		{"name with an empty hash tag", redisstore.New(good, redisstore.Options{}), "}svc", "would hash to different slots"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := manager.Start(manager.Options{Logger: quiet})
			defer m.Stop()
			_, err := m.Register(tt.bname, manager.Config{Store: tt.store})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), strconv.Quote(tt.bname), "the error names the breaker")
			assert.Contains(t, err.Error(), "Config.Store")
		})
	}
	m := manager.Start(manager.Options{Logger: quiet})
	defer m.Stop()
	_, err := m.Register("a}b", manager.Config{Store: redisstore.New(good, redisstore.Options{})})
	assert.NoError(t, err, "a '}' after the first character keeps every key of the breaker in the tag {a}")
}

// A go-redis client that ignores context deadlines is refused, with an
// error naming the option to set.
func TestRedisRefusesAClientWithoutDeadlines(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { c.Close() })
	st := redisstore.New(c, redisstore.Options{})
	require.Error(t, st.Err())
	assert.Contains(t, st.Err().Error(), "ContextTimeoutEnabled")
	m := manager.Start(manager.Options{Logger: quiet})
	defer m.Stop()
	_, err := m.Register("svc", manager.Config{Store: st})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ContextTimeoutEnabled")
}

package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/store"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

// usedMemory is INFO memory's used_memory.
func usedMemory(t *testing.T, c *redis.Client) int64 {
	info, err := c.Info(context.Background(), "memory").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}

// What Redis holds for a breaker counting failures: at most 200 bytes
// with no quorum; a quorum's reporters cost a hash more. Measured as
// used_memory before and after 2,000 breakers with two failures each.
func TestRedisMemoryPerBreakerCounting(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer c.Close()
	s := redisstore.New(c, redisstore.Options{})
	const n = 2000
	per := func(prefix string, p store.Policy) float64 {
		before := usedMemory(t, c)
		for i := range n {
			name := fmt.Sprintf("%s-%d", prefix, i)
			for _, r := range []string{"5f1c0e9a2b7d4c3e8f6a1b2c", "9e8d7c6b5a4f3e2d1c0b9a8f"} { // managers name themselves so
				q := p
				q.Reporter = r
				_, err := s.RecordFailure(context.Background(), name, q, 1, nil)
				require.NoError(t, err)
			}
		}
		return float64(usedMemory(t, c)-before) / n
	}
	plain := per("plain", store.Policy{Failures: 5})
	quorum := per("quorum", store.Policy{Failures: 5, Quorum: 2})
	t.Logf("Redis memory per breaker counting failures: %.0f B; with a quorum of 2 (two reporters): %.0f B", plain, quorum)
	assert.LessOrEqual(t, plain, 200.0, "bytes per breaker counting failures")
	assert.Greater(t, quorum, plain, "the reporters cost something: the measure measures")
}

// What a quorum costs Redis per reporter: one breaker, 1,000 reporters
// (a fleet of 1,000 processes) each reporting failures, of a run and of a
// window, measured with MEMORY USAGE of the breaker's key of reporters:
// at most 64 bytes a reporter, of a run and of a window (see
// docs/fleet.md). The same breakers
// without a quorum keep no key of reporters.
func TestRedisMemoryPerReporter(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer c.Close()
	s := redisstore.New(c, redisstore.Options{})
	const reporters = 1000
	per := func(name string, p store.Policy) float64 {
		for i := range reporters {
			q := p
			q.Reporter = fmt.Sprintf("web-%04d-%d", i, 4000+i) // as Options.Name's default: host name and process id
			_, err := s.RecordFailure(context.Background(), name, q, 1, []int64{3})
			require.NoError(t, err)
		}
		n, err := c.MemoryUsage(context.Background(), s.Key(name, "reporters"), 0).Result()
		if errors.Is(err, redis.Nil) {
			return 0
		}
		require.NoError(t, err)
		return float64(n) / reporters
	}
	run := store.Policy{Failures: 1 << 30}
	window := store.Policy{Rate: 1, Period: time.Minute, Buckets: 10, MinCalls: 1 << 30}
	plainRun, plainWindow := per("plain-run", run), per("plain-window", window)
	run.Quorum, window.Quorum = 2, 2
	quorumRun, quorumWindow := per("quorum-run", run), per("quorum-window", window)
	t.Logf("Redis memory per reporter, 1,000 reporters: a run %.1f B, a window %.1f B (without a quorum: %.0f B, %.0f B)",
		quorumRun, quorumWindow, plainRun, plainWindow)
	assert.Zero(t, plainRun, "a run without a quorum keeps nothing per reporter")
	assert.Zero(t, plainWindow, "a window without a quorum keeps nothing per reporter")
	assert.Positive(t, quorumRun, "the measure measures")
	assert.LessOrEqual(t, quorumRun, 64.0, "bytes per reporter of a run")
	assert.LessOrEqual(t, quorumWindow, 64.0, "bytes per reporter of a window")
}

package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

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
				_, err := s.RecordFailure(context.Background(), name, q, nil)
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

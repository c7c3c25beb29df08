package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

// One breaker's bad data is that breaker's problem: its epoch key holding
// text, a number past what an epoch can be, or a hash fails that breaker's
// status (Status.Err) and its calls, never a status read of the store's
// other breakers, which keep following the store (no StoreDown, a
// FailClosed neighbour admits every call to a healthy service); a Reset
// of the bad breaker repairs it. On 19f756c the one bad key failed every
// status read that included it, and marked the whole store down.
func TestFleetBadKeyTouchesNoOtherBreaker(t *testing.T) {
	srv := redistest.Start(t)
	for _, junk := range []struct {
		name string
		set  func(c *redis.Client, key string) error
	}{
		{"text", func(c *redis.Client, key string) error { return c.Set(context.Background(), key, "hello", 0).Err() }},
		{"2^64", func(c *redis.Client, key string) error {
			return c.Set(context.Background(), key, "18446744073709551616", 0).Err()
		}},
		{"a hash", func(c *redis.Client, key string) error { return c.HSet(context.Background(), key, "a", "b").Err() }},
	} {
		t.Run(junk.name, func(t *testing.T) {
			client := newClient(t, srv)
			st := redisstore.New(client, redisstore.Options{Prefix: "bad" + junk.name})
			bad, good := "bad", "good"
			require.NoError(t, junk.set(client, st.Key(bad, "epoch")))

			// The store's read: the bad breaker's status says why, the
			// good one's stands.
			ctx := context.Background()
			sts, err := st.Status(ctx, []string{bad, good})
			require.NoError(t, err, "a status read of both")
			require.Error(t, sts[0].Err, "the bad breaker's status")
			assert.Contains(t, sts[0].Err.Error(), `"bad"`, "the error names the breaker")
			assert.Equal(t, store.Status{}, sts[1], "the good breaker's status")

			// Managers: the good breakers never say StoreDown, and a
			// FailClosed one admits every call.
			m := manager.Start(manager.Options{Logger: quiet, Resync: 20 * time.Millisecond, StoreTimeout: 500 * time.Millisecond})
			t.Cleanup(m.Stop)
			cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Recover: recover.BasicTimeout{Open: time.Second}, Store: st}
			bb, err := m.Register(bad, cfg)
			require.NoError(t, err)
			gb, err := m.Register(good, cfg)
			require.NoError(t, err)
			cfg.Fallback = store.FailClosed
			fc, err := m.Register("closed-neighbour", cfg)
			require.NoError(t, err)
			m.Sync()
			var declined int
			for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
				for _, b := range []*manager.Breaker{gb, fc} {
					assert.False(t, b.Stats().StoreDown, "%s says StoreDown", b.Name())
				}
				if err := fc.Do(ctx, func(context.Context) error { return nil }); errors.Is(err, breaker.ErrOpen) {
					declined++
				}
			}
			assert.Zero(t, declined, "calls the FailClosed neighbour declined in a second")
			waitFor(t, 5*time.Second, "the bad breaker counts its error", func() bool { return bb.Stats().StoreErrors > 0 })

			// A Reset repairs it.
			require.NoError(t, bb.Reset())
			sts, err = st.Status(ctx, []string{bad})
			require.NoError(t, err)
			require.NoError(t, sts[0].Err, "the bad breaker's status after its Reset")
			waitFor(t, 5*time.Second, "the bad breaker follows the store again", func() bool { return !bb.Stats().StoreDown })
		})
	}
}

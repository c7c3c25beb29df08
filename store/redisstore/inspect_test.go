package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/store"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

// inspected is one breaker put in a state through the store's own methods,
// and what Inspect and List must read of it.
type inspected struct {
	name  string
	setup func(t *testing.T, st *redisstore.Store)
	state breaker.State
	check func(t *testing.T, b redisstore.Breaker)
}

var consecutive = store.Policy{Failures: 100}

func inspectedBreakers(ctx context.Context) []inspected {
	return []inspected{
		{"counting", func(t *testing.T, st *redisstore.Store) {
			for range 2 {
				_, err := st.RecordFailure(ctx, "counting", consecutive, 1, nil)
				require.NoError(t, err)
			}
		}, breaker.Closed, func(t *testing.T, b redisstore.Breaker) {
			assert.Equal(t, redisstore.Breaker{Name: "counting", Failures: 2}, b)
		}},
		{"window", func(t *testing.T, st *redisstore.Store) {
			p := store.Policy{Rate: 0.5, Period: time.Minute, Buckets: 6, MinCalls: 100}
			_, err := st.RecordFailure(ctx, "window", p, 1, []int64{3})
			require.NoError(t, err)
		}, breaker.Closed, func(t *testing.T, b redisstore.Breaker) {
			assert.Equal(t, redisstore.Breaker{Name: "window", Window: true, Failures: 1, Calls: 4}, b)
		}},
		{"open", func(t *testing.T, st *redisstore.Store) {
			_, _, err := st.Open(ctx, "open", 0, time.Minute, store.Reason{})
			require.NoError(t, err)
		}, breaker.Open, func(t *testing.T, b redisstore.Breaker) {
			assert.Equal(t, uint64(1), b.Epoch)
			assert.False(t, b.Forced)
			assert.InDelta(t, time.Minute, b.Open, float64(10*time.Second), "period left")
		}},
		{"half-open", func(t *testing.T, st *redisstore.Store) {
			_, _, err := st.Open(ctx, "half-open", 0, 0, store.Reason{})
			require.NoError(t, err)
		}, breaker.HalfOpen, func(t *testing.T, b redisstore.Breaker) {
			assert.Equal(t, redisstore.Breaker{Name: "half-open", Status: store.Status{Epoch: 1}}, b)
		}},
		{"probing", func(t *testing.T, st *redisstore.Store) {
			_, _, err := st.Open(ctx, "probing", 0, 0, store.Reason{})
			require.NoError(t, err)
			won, _, err := st.AcquireProbe(ctx, "probing", "tok-1", 1, time.Minute)
			require.NoError(t, err)
			require.True(t, won)
		}, breaker.Probing, func(t *testing.T, b redisstore.Breaker) {
			assert.Equal(t, "tok-1", b.Holder)
			assert.Zero(t, b.Open)
			assert.InDelta(t, time.Minute, b.Probe, float64(10*time.Second), "lease left")
		}},
		{"forced", func(t *testing.T, st *redisstore.Store) {
			_, err := st.RecordFailure(ctx, "forced", consecutive, 1, nil)
			require.NoError(t, err)
			_, err = st.ForceOpen(ctx, "forced")
			require.NoError(t, err)
		}, breaker.Open, func(t *testing.T, b redisstore.Breaker) {
			assert.Equal(t, redisstore.Breaker{Name: "forced", Status: store.Status{Epoch: 1, Forced: true}, Failures: 1}, b, "forcing keeps the counts")
		}},
		{"reset", func(t *testing.T, st *redisstore.Store) {
			_, err := st.ForceOpen(ctx, "reset")
			require.NoError(t, err)
			_, err = st.Reset(ctx, "reset")
			require.NoError(t, err)
		}, breaker.Closed, func(t *testing.T, b redisstore.Breaker) {
			assert.Equal(t, redisstore.Breaker{Name: "reset", Status: store.Status{Epoch: 2}}, b, "only the epoch is left")
		}},
		{"a}:b", func(t *testing.T, st *redisstore.Store) {
			_, err := st.RecordFailure(ctx, "a}:b", consecutive, 1, nil)
			require.NoError(t, err)
		}, breaker.Closed, func(t *testing.T, b redisstore.Breaker) {
			assert.Equal(t, redisstore.Breaker{Name: "a}:b", Failures: 1}, b)
		}},
	}
}

// checkInspect puts every breaker of inspectedBreakers in its state on st,
// and checks what Inspect and List read, with the breakers of the stores
// others, on other prefixes, left out.
func checkInspect(t *testing.T, st *redisstore.Store, others ...*redisstore.Store) {
	ctx := context.Background()
	cases := inspectedBreakers(ctx)
	for _, o := range others {
		_, err := o.RecordFailure(ctx, "other", consecutive, 1, nil)
		require.NoError(t, err)
	}
	for _, c := range cases {
		c.setup(t, st)
	}
	for _, c := range cases {
		b, ok, err := st.Inspect(ctx, c.name)
		require.NoError(t, err, c.name)
		require.True(t, ok, "Inspect(%q) finds it", c.name)
		assert.Equal(t, c.state, b.State(), "State of %q", c.name)
		// The store's clock is this machine's.
		assert.WithinDuration(t, time.Now(), b.At, 5*time.Second, "At of %q: the store's clock at the read", c.name)
		if b.State() == breaker.Open && !b.Forced {
			assert.Equal(t, b.At.Add(b.Open), b.PeriodEnd(), "PeriodEnd of %q: At plus the period left", c.name)
		} else {
			assert.Zero(t, b.PeriodEnd(), "PeriodEnd of %q: no period runs", c.name)
		}
		if !b.Since.IsZero() { // a store whose scripts keep the since key
			assert.WithinDuration(t, b.At, b.Since, time.Minute, "Since of %q", c.name)
		}
		b.At, b.Since = time.Time{}, time.Time{}
		c.check(t, b)
	}
	_, ok, err := st.Inspect(ctx, "none")
	require.NoError(t, err)
	assert.False(t, ok, "Inspect of a breaker the store holds nothing of")

	list, err := st.List(ctx)
	require.NoError(t, err)
	var listed []string
	for _, b := range list {
		listed = append(listed, b.Name)
		want, _, err := st.Inspect(ctx, b.Name)
		require.NoError(t, err)
		assert.Equal(t, want.State(), b.State(), "List's state of %q", b.Name)
	}
	assert.Equal(t, []string{"a}:b", "counting", "forced", "half-open", "open", "probing", "reset", "window"}, listed, "List: every breaker with state, by name")
}

// The prefix holds characters a SCAN pattern gives a meaning: List
// matches them as they are.
func TestInspect(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv)
	checkInspect(t, redisstore.New(c, redisstore.Options{Prefix: "t[?"}),
		redisstore.New(c, redisstore.Options{Prefix: "tx"}),
		redisstore.New(c, redisstore.Options{Prefix: "t[?:x"}))
}

func TestInspectCluster(t *testing.T) {
	addrs := redistest.StartCluster(t, 3)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	checkInspect(t, redisstore.New(c, redisstore.Options{}), redisstore.New(c, redisstore.Options{Prefix: "other"}))
	// List found them all only if it scanned every master: each holds some.
	var mu sync.Mutex
	held := map[string]int64{}
	require.NoError(t, c.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		mu.Lock()
		held[m.Options().Addr] = n
		mu.Unlock()
		return err
	}))
	require.Len(t, held, 3)
	for addr, n := range held {
		assert.Positive(t, n, "keys on the master %s", addr)
	}
}

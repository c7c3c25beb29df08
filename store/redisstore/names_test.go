package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/store"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

// growingList is a list of breakers that grows while WatchNames follows
// it, as a manager's does while breakers register.
type growingList struct {
	mu      sync.Mutex
	list    []string
	changed chan struct{}
}

func (l *growingList) names() ([]string, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.list, l.changed
}

func (l *growingList) add(names ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(slices.Clip(l.list), names...)
	close(l.changed)
	l.changed = make(chan struct{})
}

// WatchNames of 10,000 breakers on a Cluster that announces on shard
// channels subscribes to the channels of their slots only, and calls ready
// with all of them once every one is confirmed; breakers registered later,
// one at a time as Register in a loop would add them, are subscribed in a
// few batches without dropping the others. What it costs: the time to
// subscribe, the subscriptions, the masters' memory.
func watchNames10000(t *testing.T, cl *redistest.Cluster) {
	ctx := context.Background()
	c := newClusterClient(t, cl.Addrs())
	st := redisstore.New(c, redisstore.Options{Prefix: "names"})
	l := &growingList{changed: make(chan struct{})}
	slotsOf := map[string]bool{}
	for i := range 10_000 {
		name := fmt.Sprintf("svc-%05d", i)
		l.list = append(l.list, name)
		slotsOf[st.ShardChannel(name)] = true
	}
	before := shardSubscriptions(t, c, "names")
	readies := make(chan []string, 1024)
	changes := make(chan store.Change, 64)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- st.WatchNames(wctx, l.names, func(n []string) { readies <- n }, func(ch store.Change) { changes <- ch })
	}()
	defer func() {
		cancel()
		assert.NoError(t, <-done)
	}()
	next := func(what string) []string {
		t.Helper()
		select {
		case n := <-readies:
			return n
		case err := <-done:
			t.Fatalf("WatchNames ended while waiting for %s: %v", what, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not ready within 10s", what)
		}
		return nil
	}
	first := next("the first 10,000")
	took := time.Since(start)
	assert.Len(t, first, 10_000, "the first ready names every breaker of the first list")
	after := shardSubscriptions(t, c, "names")
	assert.Equal(t, len(slotsOf), after.channels, "shard channels subscribed: one per slot of the breakers")

	// 1,000 more, one at a time.
	start = time.Now()
	var late []string
	for i := range 1000 {
		name := fmt.Sprintf("late-%04d", i)
		late = append(late, name)
		l.add(name)
	}
	batches, got := 0, 0
	for got < len(late) {
		got += len(next("the late breakers"))
		batches++
	}
	lateTook := time.Since(start)
	heard := func(name string) {
		t.Helper()
		_, err := st.ForceOpen(ctx, name)
		require.NoError(t, err)
		for {
			select {
			case ch := <-changes:
				if ch.Name == name {
					return
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("the forcing of %s was not heard within 5s", name)
			}
		}
	}
	heard("late-0999")
	heard("svc-00042") // the first ones are still heard
	heard("late-0000")
	t.Logf("WatchNames of 10,000 breakers: %d shard channels on %d masters, subscribed in %v, the masters' memory grew by %d KiB; 1,000 more added one at a time were ready in %d batches within %v",
		after.channels, after.masters, took.Round(time.Millisecond), (after.memory-before.memory)/1024, batches, lateTook.Round(time.Millisecond))
}

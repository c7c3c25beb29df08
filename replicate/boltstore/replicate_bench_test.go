package boltstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/replicate"
	"github.com/fusebox-go/fusebox/replicate/boltstore"
	"github.com/fusebox-go/fusebox/replicate/replicatetest"
)

// hungTimeout is the replica timeout of the benchmark of a hung replica
// without a breaker: short, so that it ends. The others use one long
// enough that a busy machine does not make a healthy call time out.
const (
	hungTimeout = 2 * time.Millisecond
	longTimeout = 10 * time.Second
)

// benchKeys is how many distinct keys the benchmarks write, round robin.
const benchKeys = 1024

var benchKeyNames = func() []string {
	k := make([]string, benchKeys)
	for i := range k {
		k[i] = "key-" + strconv.Itoa(i)
	}
	return k
}()

var benchValue = []byte("a value of some thirty-two bytes")

// primaries are the Primaries the benchmarks run on. The bolt one reports
// syncs/op, the disk syncs per write: what group commit saves, whatever
// the disk's speed at the moment.
var primaries = []struct {
	name string
	open func(b *testing.B) replicate.Primary
}{
	{"memory", func(*testing.B) replicate.Primary { return replicate.NewMemory() }},
	{"bolt", func(b *testing.B) replicate.Primary {
		s, err := boltstore.Open(filepath.Join(b.TempDir(), "primary.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		boltOf.Store(b, s)
		b.Cleanup(func() { boltOf.Delete(b) })
		return s
	}},
}

// boltOf maps a benchmark to its bolt primary, whose commits concurrently
// counts.
var boltOf sync.Map // *testing.B to *boltstore.Store

// writerCounts are the numbers of concurrent writers the benchmarks run
// with: a lone writer, and two crowds that share the bolt primary's syncs.
var writerCounts = []int{1, 4, 16}

// BenchmarkPrimaryPut is a write to the primary alone: the floor for
// Replicator.Put.
func BenchmarkPrimaryPut(b *testing.B) {
	for _, pr := range primaries {
		for _, n := range writerCounts {
			b.Run(fmt.Sprintf("%s/writers=%d", pr.name, n), func(b *testing.B) {
				p := pr.open(b)
				ctx := context.Background()
				concurrently(b, n, func(i int) error {
					return p.Put(ctx, benchKeyNames[i%benchKeys], benchValue)
				})
			})
		}
	}
}

// BenchmarkPut is Replicator.Put with a healthy replica, and with a hung
// replica behind an open breaker (the write must cost little more than the
// primary write), each with 1, 4 and 16 concurrent writers; and, with one
// writer, with a hung replica behind a breaker that never trips, so that
// every write waits the replica timeout (hungTimeout).
func BenchmarkPut(b *testing.B) {
	for _, pr := range primaries {
		for _, n := range writerCounts {
			b.Run(fmt.Sprintf("healthy/%s/writers=%d", pr.name, n), func(b *testing.B) {
				r, _ := benchReplicator(b, pr.open(b), longTimeout, manager.Config{})
				benchPut(b, r, n, true)
			})
		}
		for _, n := range writerCounts {
			b.Run(fmt.Sprintf("hung-open-breaker/%s/writers=%d", pr.name, n), func(b *testing.B) {
				r, replica := benchReplicator(b, pr.open(b), longTimeout, manager.Config{
					Strategy: breaker.Consecutive{Failures: 1},
					Recover:  recover.BasicTimeout{Open: time.Hour},
				})
				replica.Hang()
				res, err := r.Put(context.Background(), "trip", benchValue)
				if err != nil || res.Replicated {
					b.Fatalf("the write meant to trip the breaker: %+v, %v", res, err)
				}
				benchPut(b, r, n, false)
			})
		}
	}
	b.Run("hung-no-breaker/memory/writers=1", func(b *testing.B) {
		r, replica := benchReplicator(b, replicate.NewMemory(), hungTimeout, manager.Config{
			// A breaker that never trips stands for no breaker.
			Classify: func(error) classify.Outcome { return classify.Ignore },
		})
		replica.Hang()
		benchPut(b, r, 1, false)
	})
}

func benchReplicator(b *testing.B, p replicate.Primary, timeout time.Duration, cfg manager.Config) (*replicate.Replicator, *replicatetest.Replica) {
	b.Helper()
	m := manager.Start(manager.Options{})
	b.Cleanup(m.Stop)
	br, err := m.Register("replica", cfg)
	if err != nil {
		b.Fatal(err)
	}
	replica := replicatetest.NewReplica()
	// Catch-up kept out of the way: the benchmarks measure the writes.
	r, err := replicate.New(p, replica, br, replicate.Options{Timeout: timeout, Manager: m, RetryInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close() })
	return r, replica
}

func benchPut(b *testing.B, r *replicate.Replicator, writers int, wantReplicated bool) {
	ctx := context.Background()
	concurrently(b, writers, func(i int) error {
		res, err := r.Put(ctx, benchKeyNames[i%benchKeys], benchValue)
		if err != nil {
			return err
		}
		if res.Replicated != wantReplicated {
			return fmt.Errorf("write %d: replicated %v, want %v (cause %v)", i, res.Replicated, wantReplicated, res.Cause)
		}
		return nil
	})
}

// concurrently makes b.N calls of write, numbered from 0, from writers
// goroutines at once, so that ns/op is the time per write of the crowd:
// its inverse is the crowd's throughput. Consecutive numbers go to
// different goroutines, so concurrent writes use different keys.
func concurrently(b *testing.B, writers int, write func(i int) error) {
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	var commits0 uint64
	s, isBolt := boltOf.Load(b)
	if isBolt {
		commits0 = boltstore.Commits(s.(*boltstore.Store))
	}
	b.ResetTimer()
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				if err := write(i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if isBolt {
		b.ReportMetric(float64(boltstore.Commits(s.(*boltstore.Store))-commits0)/float64(b.N), "syncs/op")
	}
}

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
	concurrently(b, writers, putting(r, wantReplicated))
}

// putting returns a write through r of key number i, which fails unless
// its Result.Replicated is wantReplicated.
func putting(r *replicate.Replicator, wantReplicated bool) func(i int) error {
	ctx := context.Background()
	return func(i int) error {
		res, err := r.Put(ctx, benchKeyNames[i%benchKeys], benchValue)
		if err != nil {
			return err
		}
		if res.Replicated != wantReplicated {
			return fmt.Errorf("write %d: replicated %v, want %v (cause %v)", i, res.Replicated, wantReplicated, res.Cause)
		}
		return nil
	}
}

// concurrently makes b.N calls of write, numbered from 0, from writers
// goroutines at once, so that ns/op is the time per write of the crowd:
// its inverse is the crowd's throughput.
func concurrently(b *testing.B, writers int, write func(i int) error) {
	b.ReportAllocs()
	var commits0 uint64
	s, isBolt := boltOf.Load(b)
	if isBolt {
		commits0 = boltstore.Commits(s.(*boltstore.Store))
	}
	b.ResetTimer()
	if err := crowd(writers, 0, b.N, write); err != nil {
		b.Error(err)
	}
	b.StopTimer()
	if isBolt {
		b.ReportMetric(float64(boltstore.Commits(s.(*boltstore.Store))-commits0)/float64(b.N), "syncs/op")
	}
}

// crowd makes n calls of write, numbered from first, from writers
// goroutines at once, and returns the first error. Consecutive numbers go
// to different goroutines, so concurrent writes use different keys.
func crowd(writers, first, n int, write func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var errOnce sync.Once
	var err error
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if e := write(first + i); e != nil {
					errOnce.Do(func() { err = e })
					next.Store(int64(n)) // the others stop too
					return
				}
			}
		}()
	}
	wg.Wait()
	return err
}

// scaleWrites is how many writes the lone writer makes in each round of
// BenchmarkScaling; the crowd makes scaleCrowd times as many.
const (
	scaleWrites = 25
	scaleCrowd  = 16
)

// BenchmarkScaling measures what group commit is for: the throughput of 16
// concurrent writers against one's, on a bbolt primary alone, through a
// Replicator with a healthy replica (a write and its confirmation), and
// with a hung replica behind an open breaker. A disk sync's speed drifts
// by several times from one second to the next on a shared machine, so
// the two are not measured in benchmarks of their own, seconds apart: each
// of the b.N rounds (ns/op is a round) has the lone writer make 25 writes
// and then 16 writers 400, on the same store, and the run reports
//
//	x16/1                 throughput of the 16 writers / throughput of the lone one, over the run
//	us/write(1), (16)     the time per write of each, in microseconds
//	syncs/write(1), (16)  the disk syncs per write of each: what the crowd shares
func BenchmarkScaling(b *testing.B) {
	cases := []struct {
		name  string
		write func(b *testing.B, s *boltstore.Store) func(i int) error
	}{
		{"primary", func(b *testing.B, s *boltstore.Store) func(int) error {
			ctx := context.Background()
			return func(i int) error { return s.Put(ctx, benchKeyNames[i%benchKeys], benchValue) }
		}},
		{"healthy", func(b *testing.B, s *boltstore.Store) func(int) error {
			r, _ := benchReplicator(b, s, longTimeout, manager.Config{})
			return putting(r, true)
		}},
		{"hung-open-breaker", func(b *testing.B, s *boltstore.Store) func(int) error {
			r, replica := benchReplicator(b, s, longTimeout, manager.Config{
				Strategy: breaker.Consecutive{Failures: 1},
				Recover:  recover.BasicTimeout{Open: time.Hour},
			})
			replica.Hang()
			if res, err := r.Put(context.Background(), "trip", benchValue); err != nil || res.Replicated {
				b.Fatalf("the write meant to trip the breaker: %+v, %v", res, err)
			}
			return putting(r, false)
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			s, err := boltstore.Open(filepath.Join(b.TempDir(), "primary.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			write := c.write(b, s)
			b.ReportAllocs()
			var took [2]time.Duration
			var syncs [2]uint64
			next := 0
			b.ResetTimer()
			for range b.N {
				for k, writers := range [2]int{1, scaleCrowd} {
					n := scaleWrites * writers
					c0, t0 := boltstore.Commits(s), time.Now()
					if err := crowd(writers, next, n, write); err != nil {
						b.Fatal(err)
					}
					took[k] += time.Since(t0)
					syncs[k] += boltstore.Commits(s) - c0
					next += n
				}
			}
			b.StopTimer()
			writes := [2]float64{float64(b.N * scaleWrites), float64(b.N * scaleWrites * scaleCrowd)}
			perWrite := func(k int) float64 { return took[k].Seconds() / writes[k] }
			b.ReportMetric(perWrite(0)/perWrite(1), "x16/1")
			b.ReportMetric(perWrite(0)*1e6, "us/write(1)")
			b.ReportMetric(perWrite(1)*1e6, "us/write(16)")
			b.ReportMetric(float64(syncs[0])/writes[0], "syncs/write(1)")
			b.ReportMetric(float64(syncs[1])/writes[1], "syncs/write(16)")
		})
	}
}

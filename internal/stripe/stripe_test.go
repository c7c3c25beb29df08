package stripe

import (
	"runtime"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestZeroValue(t *testing.T) {
	var c Counters
	for i := range N {
		if got := c.Load(i); got != 0 {
			t.Fatalf("Load(%d) of a zero Counters = %d", i, got)
		}
	}
	if c.Bytes() != 0 {
		t.Fatalf("an unused Counters holds %d bytes of lines", c.Bytes())
	}
	c.Add(2)
	if got := c.Load(2); got != 1 {
		t.Fatalf("after one Add(2): Load(2) = %d", got)
	}
	if c.Bytes() == 0 {
		t.Fatal("a used Counters holds no lines")
	}
}

// TestNoLostCounts adds from many goroutines at once, with more goroutines
// than Ps so that goroutines share and change Ps, and checks every counter.
func TestNoLostCounts(t *testing.T) {
	var c Counters
	const goroutines, each = 64, 5000
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for k := range each {
				c.Add((g + k) % N)
				if k%512 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	var total uint64
	for i := range N {
		total += c.Load(i)
	}
	if total != goroutines*each {
		t.Fatalf("counted %d increments, want %d", total, goroutines*each)
	}
}

// TestMoreProcsThanLines grows GOMAXPROCS after the lines were allocated:
// the Ps without a line fall back to the shared atomic counters.
func TestMoreProcsThanLines(t *testing.T) {
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	var c Counters
	c.Add(0) // one line, for one P
	runtime.GOMAXPROCS(8)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				c.Add(0)
			}
		}()
	}
	wg.Wait()
	if got := c.Load(0); got != 16*1000+1 {
		t.Fatalf("Load(0) = %d, want %d", got, 16*1000+1)
	}
}

func BenchmarkAdd(b *testing.B) {
	var c Counters
	b.ReportAllocs()
	for b.Loop() {
		c.Add(3)
	}
}

func BenchmarkAddParallel(b *testing.B) {
	var c Counters
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Add(3)
		}
	})
}

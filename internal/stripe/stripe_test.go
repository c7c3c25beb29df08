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
	if c.Bytes() != 0 {
		t.Fatal("an add that met no other holds lines")
	}
}

// Once spread over lines, the counters keep what they counted before and
// count on.
func TestSpreadKeepsCounts(t *testing.T) {
	var c Counters
	for i := range N {
		for range i + 1 {
			c.Add(i)
		}
	}
	c.spread(0) // as a contended add does
	if got, want := c.Bytes(), Lines()*lineSize; got != want {
		t.Fatalf("spread: %d bytes of lines, want %d", got, want)
	}
	for i := range N {
		for range 10 {
			c.Add(i)
		}
	}
	for i := range N {
		if got, want := c.Load(i), uint64(i+1+10+btoi(i == 0)); got != want {
			t.Fatalf("Load(%d) = %d, want %d", i, got, want)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Lines is a power of two, at least 4*GOMAXPROCS.
func TestLines(t *testing.T) {
	old := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(old)
	for _, procs := range []int{1, 2, 3, 8, 13} {
		runtime.GOMAXPROCS(procs)
		n := Lines()
		if n < 4*procs || n&(n-1) != 0 {
			t.Errorf("GOMAXPROCS %d: Lines() = %d", procs, n)
		}
	}
}

// Every line pick is in range, whatever the stack depth.
func TestPickInRange(t *testing.T) {
	var walk func(depth int)
	walk = func(depth int) {
		for _, n := range []int{1, 2, 8, 4096} {
			if j := pick(n); j < 0 || j >= n {
				t.Fatalf("pick(%d) = %d at depth %d", n, j, depth)
			}
		}
		if depth < 200 {
			walk(depth + 1)
		}
	}
	walk(0)
}

// TestNoLostCounts adds from many goroutines at once, with more goroutines
// than Ps so that goroutines share and change Ps, and checks every counter:
// nothing is lost while the counters spread over lines under contention.
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

// TestMoreProcsThanLines grows GOMAXPROCS after the lines were made: the
// lines stay as they are and count exactly.
func TestMoreProcsThanLines(t *testing.T) {
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	var c Counters
	c.Add(0)
	c.spread(0)
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
	if got := c.Load(0); got != 16*1000+2 {
		t.Fatalf("Load(0) = %d, want %d", got, 16*1000+2)
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

func BenchmarkAddSpread(b *testing.B) {
	var c Counters
	c.spread(3)
	b.ReportAllocs()
	for b.Loop() {
		c.Add(3)
	}
}

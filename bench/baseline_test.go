package bench_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkBaseline measures the machine's cost of the operations the
// libraries are built from, to read the side-by-side numbers by: one
// atomic add (a LOCK-prefixed instruction on amd64), one atomic load, one
// uncontended mutex Lock and Unlock, and one time.Now. gobreaker takes its
// mutex twice and reads the clock twice per call; fusebox's closed path
// makes one atomic add per call.
func BenchmarkBaseline(b *testing.B) {
	b.Run("op=atomic-add", func(b *testing.B) {
		var n atomic.Uint64
		for b.Loop() {
			n.Add(1)
		}
	})
	b.Run("op=atomic-load", func(b *testing.B) {
		var n atomic.Uint64
		var sum uint64
		for b.Loop() {
			sum += n.Load()
		}
		sink.Store(sum)
	})
	b.Run("op=mutex", func(b *testing.B) {
		var mu sync.Mutex
		for b.Loop() {
			mu.Lock()
			//lint:ignore SA2001 the benchmark measures an uncontended lock and unlock
			mu.Unlock()
		}
	})
	b.Run("op=time-now", func(b *testing.B) {
		var t time.Time
		for b.Loop() {
			t = time.Now()
		}
		sink.Store(uint64(t.UnixNano()))
	})
}

var sink atomic.Uint64

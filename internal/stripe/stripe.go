// Package stripe counts events that many goroutines report at once, such as
// the calls through one breaker, without making goroutines fight over one
// cache line.
//
// A Counters starts as one atomic word per counter. As long as one
// goroutine at a time adds to it, an add is a compare-and-swap on that
// word, which finds the word in its own cache. The first add that loses
// its compare-and-swap to another goroutine's, which is what contention
// looks like, spreads the counters over lines: several cache lines of
// counters, each add going to the line its goroutine's stack address picks.
// Goroutines on different Ps then mostly write different lines, so the
// lines stay in their Ps' caches instead of moving between them on every
// add. Readers sum the word and the lines.
//
// Every access is atomic, the adds as well as the reads that sum them, so
// a reader never races with a writer under the Go memory model, and a
// 64-bit counter cannot be seen half written on a 32-bit platform. The
// stack address is only a hint: a goroutine whose stack has moved, or two
// goroutines that pick the same line, still count exactly, only slower.
// (Pinning the goroutine to its P to pick the line, the way sync.Pool does,
// costs more than the atomic add it would spread out.)
//
// A counter set that is never contended costs only its header, whatever
// GOMAXPROCS is.
package stripe

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// N is how many counters a Counters holds.
const N = 8

const lineSize = 64

// line is one stripe of the counters. atomic.Uint64 keeps each 64-bit
// aligned, as 64-bit atomics need on 32-bit platforms.
type line struct {
	// The padding first: a zero-sized last field (N*8 == lineSize) would
	// make the compiler pad the struct past the line.
	_ [lineSize - N*8]byte
	n [N]atomic.Uint64
}

// Counters is a set of N counters. Its zero value is ready to use; it must
// not be copied after first use.
type Counters struct {
	lines atomic.Pointer[[]line] // nil until the first contended add
	base  [N]atomic.Uint64
}

// Add adds one to counter i.
func (c *Counters) Add(i int) {
	if ls := c.lines.Load(); ls != nil {
		(*ls)[pick(len(*ls))].n[i].Add(1)
		return
	}
	w := &c.base[i]
	if v := w.Load(); w.CompareAndSwap(v, v+1) {
		return
	}
	c.spread(i)
}

// pick returns the line, of n (a power of two), for the calling goroutine:
// a hash of its stack address. Goroutine stacks are at least 2 KiB apart,
// so the bits below that are dropped; the multiplication (Fibonacci
// hashing) spreads stacks that follow one another over the lines.
func pick(n int) int {
	var x byte
	h := uint64(uintptr(unsafe.Pointer(&x))>>11) * 0x9E3779B97F4A7C15
	return int(h>>32) & (n - 1)
}

// spread makes the lines, unless another goroutine did first, and counts
// the add there. It is a function of its own so that Add stays small.
func (c *Counters) spread(i int) {
	if c.lines.Load() == nil {
		ls := make([]line, Lines())
		c.lines.CompareAndSwap(nil, &ls)
	}
	c.Add(i)
}

// Lines returns how many lines a Counters spreads over once contended: the
// power of two at or above 4*GOMAXPROCS, at the time, so that goroutines
// running at once seldom pick the same line.
func Lines() int {
	n := 1
	for n < 4*runtime.GOMAXPROCS(0) && n < 1<<12 {
		n <<= 1
	}
	return n
}

// Load returns counter i. Under concurrent Adds the sum is a moment's value
// and may miss increments made while it is read.
func (c *Counters) Load(i int) uint64 {
	v := c.base[i].Load()
	if ls := c.lines.Load(); ls != nil {
		for j := range *ls {
			v += (*ls)[j].n[i].Load()
		}
	}
	return v
}

// Bytes returns the memory the counters use beyond their header: the lines,
// once an add was contended.
func (c *Counters) Bytes() int {
	if ls := c.lines.Load(); ls != nil {
		return len(*ls) * int(unsafe.Sizeof(line{}))
	}
	return 0
}

// Package stripe counts events that many goroutines report at once, such as
// the calls through one breaker, without making them fight over one cache
// line.
//
// A Counters starts as one line of plain atomic counters: while a single
// goroutine at a time uses it, an increment is one atomic add. Every
// sampleEvery-th increment of a counter also checks for contention with a
// compare-and-swap, which fails when another goroutine wrote the counter in
// between; the first failure spreads the set into one cache line per P (the
// scheduler's processors), and from then on every increment goes to the
// line of the P it runs on. This is the scheme of Java's LongAdder, with the
// P's index in place of a per-thread hash and a sampled check in place of a
// compare-and-swap on every increment (on x86 a compare-and-swap after a
// load costs twice an atomic add). A breaker that is never used from two
// goroutines at once never pays for the lines.
package stripe

import (
	"runtime"
	"sync/atomic"
)

// N is how many counters a Counters holds.
const N = 6

const (
	lineSize    = 64
	sampleEvery = 64
)

type line struct {
	n [N]atomic.Uint64
	_ [lineSize - N*8]byte
}

type lines struct{ l []line }

// Counters is a set of N counters. Its zero value is ready to use; it must
// not be copied after first use.
type Counters struct {
	spread atomic.Pointer[lines]
	base   [N]atomic.Uint64
}

// Add adds one to counter i.
func (c *Counters) Add(i int) {
	if n := c.FastAdd(i); n%sampleEvery == 0 {
		c.SlowAdd(i, n)
	}
}

// FastAdd is the part of Add small enough to be inlined into a hot path.
// It returns the counter's new value, or zero if it did not add because the
// counters have spread. When the result is a multiple of sampleEvery
// (zero included), the caller must call SlowAdd with it:
//
//	if n := c.FastAdd(i); n%64 == 0 {
//		c.SlowAdd(i, n)
//	}
func (c *Counters) FastAdd(i int) uint64 {
	if c.spread.Load() != nil {
		return 0
	}
	return c.base[i].Add(1)
}

// SlowAdd finishes an increment that FastAdd returned n for: with n zero it
// adds one on the line of the caller's P; otherwise the increment is done,
// and SlowAdd checks for contention, spreading the counters if it finds any.
func (c *Counters) SlowAdd(i int, n uint64) {
	if n != 0 {
		v := c.base[i].Load()
		if !c.base[i].CompareAndSwap(v, v) {
			c.grow()
		}
		return
	}
	ls := c.spread.Load()
	if ls == nil {
		ls = c.grow()
	}
	p := procPin()
	procUnpin()
	ls.l[uint(p)%uint(len(ls.l))].n[i].Add(1)
}

func (c *Counters) grow() *lines {
	if ls := c.spread.Load(); ls != nil {
		return ls
	}
	n := runtime.GOMAXPROCS(0)
	if n < 1 {
		n = 1
	}
	ls := &lines{l: make([]line, n)}
	if c.spread.CompareAndSwap(nil, ls) {
		return ls
	}
	return c.spread.Load()
}

// Load returns counter i: the sum of its base and of every line.
func (c *Counters) Load(i int) uint64 {
	v := c.base[i].Load()
	if ls := c.spread.Load(); ls != nil {
		for j := range ls.l {
			v += ls.l[j].n[i].Load()
		}
	}
	return v
}

// Spread reports whether the counters have spread into per-P lines.
func (c *Counters) Spread() bool { return c.spread.Load() != nil }

// Package stripe counts events that many goroutines report at once, such as
// the calls through one breaker, without making them fight over one cache
// line.
//
// A Counters starts as one line of plain atomic counters: while a single
// goroutine at a time uses it, an increment is one load and one
// compare-and-swap. The first increment that loses a compare-and-swap to
// another goroutine spreads the set into one cache line per P (the
// scheduler's processors), and from then on every increment goes to the line
// of the P it runs on. This is the scheme of Java's LongAdder, with the P's
// index in place of a per-thread hash. A breaker that is never used from
// two goroutines at once never pays for the lines.
package stripe

import (
	"runtime"
	"sync/atomic"
)

// N is how many counters a Counters holds.
const N = 6

const lineSize = 64

type line struct {
	n [N]atomic.Uint64
	_ [lineSize - N*8]byte
}

type lines struct{ l []line }

// Counters is a set of N counters. Its zero value is ready to use; it must
// not be copied after first use.
type Counters struct {
	base   [N]atomic.Uint64
	spread atomic.Pointer[lines]
}

// Add adds one to counter i.
func (c *Counters) Add(i int) {
	if ls := c.spread.Load(); ls != nil {
		ls.add(i)
		return
	}
	v := c.base[i].Load()
	if c.base[i].CompareAndSwap(v, v+1) {
		return
	}
	c.grow().add(i)
}

func (ls *lines) add(i int) {
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

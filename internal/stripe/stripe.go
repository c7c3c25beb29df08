// Package stripe counts events that many goroutines report at once, such as
// the calls through one breaker, without making goroutines fight over one
// cache line.
//
// A Counters keeps one cache line of counters per P (the scheduler's
// processors). An increment pins its goroutine to its P for the length of
// the increment, the way sync.Pool does, and adds to that P's line, so the
// line stays in that P's cache and no two Ps write the same line: the
// atomic add finds its line uncontended, which is what makes it cheap. A
// single shared atomic word would instead bounce between the Ps' caches on
// every call.
//
// Every access is atomic, the increments as well as the reads that sum the
// lines. A plain increment would be enough for the pinned writer, but a
// reader summing the lines meanwhile would race with it under the Go memory
// model, and on 32-bit platforms a plain 64-bit store is two stores, which
// a reader can see half done. The lines are allocated by the first
// increment, so a counter set that is never used costs only its header. If
// GOMAXPROCS grows past the number of lines, the extra Ps add to a shared
// line.
package stripe

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// N is how many counters a Counters holds.
const N = 6

const lineSize = 64

// line is one P's counters. atomic.Uint64 keeps each 64-bit aligned, as
// 64-bit atomics need on 32-bit platforms.
type line struct {
	n [N]atomic.Uint64
	_ [lineSize - N*8]byte
}

// Counters is a set of N counters. Its zero value is ready to use; it must
// not be copied after first use.
type Counters struct {
	lines atomic.Pointer[[]line]
	extra [N]atomic.Uint64 // for Ps beyond the lines
}

// Add adds one to counter i.
func (c *Counters) Add(i int) {
	p := procPin()
	if ls := c.lines.Load(); ls != nil && uint(p) < uint(len(*ls)) {
		(*ls)[p].n[i].Add(1)
		procUnpin()
		return
	}
	procUnpin()
	c.addSlow(i)
}

func (c *Counters) addSlow(i int) {
	if c.lines.Load() == nil {
		ls := make([]line, max(runtime.GOMAXPROCS(0), 1))
		c.lines.CompareAndSwap(nil, &ls)
		c.Add(i)
		return
	}
	c.extra[i].Add(1)
}

// Load returns counter i: the sum of every line. Under concurrent Adds the
// sum is a moment's value and may miss increments made while it is read.
func (c *Counters) Load(i int) uint64 {
	v := c.extra[i].Load()
	if ls := c.lines.Load(); ls != nil {
		for j := range *ls {
			v += (*ls)[j].n[i].Load()
		}
	}
	return v
}

// Bytes returns the memory the counters use beyond their header: one line
// per P once they have been used.
func (c *Counters) Bytes() int {
	if ls := c.lines.Load(); ls != nil {
		return len(*ls) * int(unsafe.Sizeof(line{}))
	}
	return 0
}

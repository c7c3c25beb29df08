// Package stripe counts events that many goroutines report at once, such as
// the calls through one breaker, without a locked instruction per event and
// without making goroutines fight over one cache line.
//
// A Counters keeps one cache line of counters per P (the scheduler's
// processors). An increment pins its goroutine to its P for the length of
// the increment, the way sync.Pool does, and adds to that P's line. While a
// goroutine is pinned no other goroutine runs on its P, and no other P
// writes that line, so the increment needs no atomic read-modify-write: a
// plain add does, which costs a fraction of the locked add an atomic
// counter pays (about 6-15 ns on the development machines). Readers sum the
// lines with atomic loads; a word-sized read observes some complete write.
//
// Under the race detector, which cannot know about pinning, the lines are
// added to atomically (see add_race.go). The lines are allocated by the
// first increment, so a counter set that is never used costs only its
// header. If GOMAXPROCS grows past the number of lines, the extra Ps add to
// a shared atomic line.
package stripe

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// N is how many counters a Counters holds.
const N = 6

const lineSize = 64

type line struct {
	n [N]uint64
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
		add(&(*ls)[p].n[i])
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
			v += atomic.LoadUint64(&(*ls)[j].n[i])
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

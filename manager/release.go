package manager

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/fusebox-go/fusebox/internal/machine"
)

// A Permit is a value, and Release has a value receiver: a release cannot
// mark the caller's permit released. So each permit carries an id, drawn
// at random as it is granted (32 bits from the runtime's per-thread
// generator, in what was the padding of its ticket: a Permit stays four
// words, the most the compiler keeps in registers; a fifth word cost
// every Acquire threefold), and the manager remembers, per goroutine, the
// generation and id of the permit it last released as a failure or an
// ignore, in one of a set of cache lines picked by a hash of the
// goroutine's stack address (as package stripe picks its lines). Such a
// release whose permit is the one its line holds is a second release of
// that permit, or of a copy, and counts nothing.
//
// What it catches: a failure (or an ignore) released twice by one
// goroutine with no other such release between the two on its line
// (defer p.Release(err) and a p.Release(err) of one's own, the usual
// slip): the second can no longer trip a breaker. What it does not: a
// second release that is a success, or comes from another goroutine, or
// after the goroutine released other failures (another goroutine sharing
// its line, or its own), or after its stack moved (it grew): those count
// again, as before. A success released twice counts two successes (in
// Stats and a window); it can delay a trip, never cause one. A first
// release is refused only if another permit of the same generation drew
// the same id and was the last failure released on the line: once in
// 2^32 such releases.
//
// The cost: a random draw per grant, a few instructions, and on the
// release of a failure or an ignore, one load and one store to a line
// that its goroutine's P mostly keeps in its own cache. A success, the
// healthy path, pays nothing more: checking it too cost a healthy call
// about half as much again as it did.
type releases struct {
	lines []releaseLine
}

// releaseLine is one line of releases: the id of the last permit
// released from a goroutine whose stack hashes to it, alone on its cache
// line so that goroutines on different Ps write different lines.
type releaseLine struct {
	id atomic.Uint64
	_  [56]byte
}

// init makes the lines: the power of two at or above 4*GOMAXPROCS.
func (r *releases) init() {
	n := 1
	for n < 4*runtime.GOMAXPROCS(0) && n < 1<<12 {
		n <<= 1
	}
	r.lines = make([]releaseLine, n)
}

// again records that the permit of ticket t is released, and reports
// whether it was released before (see releases). A ticket without an id
// (an unprotected permit's) is never released again.
func (r *releases) again(t machine.Ticket) bool {
	if t.ID == 0 {
		return false
	}
	id := t.Gen<<32 | uint64(t.ID)
	var x byte
	h := uint64(uintptr(unsafe.Pointer(&x))>>11) * 0x9E3779B97F4A7C15
	l := &r.lines[int(h>>32)&(len(r.lines)-1)]
	if l.id.Load() == id {
		return true
	}
	l.id.Store(id)
	return false
}

// releasedTwice logs, once per breaker, that one of its permits was
// released twice. It is off the call path's usual way: only a second
// release reaches it.
//
//go:noinline
func (b *Breaker) releasedTwice() {
	if _, warned := b.mgr.twice.LoadOrStore(b, struct{}{}); warned {
		return
	}
	b.mgr.logWarn("fusebox: a permit was released twice; the second release counts nothing", "breaker", b.Name(),
		"hint", "release each permit once: Do and Call release theirs; a deferred Release and a Release of one's own count the call twice")
}

// twiceWarned is the set of breakers whose permits were released twice,
// logged once each.
type twiceWarned = sync.Map

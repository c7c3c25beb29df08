package manager

import (
	"sync/atomic"

	"github.com/fusebox-go/fusebox/store"
)

// pending counts, per bucket, the successes of a shared breaker's window
// policy that the store has not been told of yet. They reach the store with
// the next failure, the next success that may trip the breaker, or the
// periodic resync, each in the bucket it was counted in (sent by age, in
// buckets, so that the store files them by its own clock): were they all
// filed in the bucket of the report, they would stay in the store's window
// after they left the local one, and the two would disagree on the rate.
//
// A slot word holds | bucket:16 | count:48 |, the bucket being the low bits
// of its index (sharepolicy.Bucket). Successes of a bucket that left the
// window before they were reported are dropped with it.
type pending struct {
	n     int64
	slots []atomic.Uint64
}

const (
	pendingShift = 48
	pendingCount = 1<<pendingShift - 1
	pendingEpoch = 1<<16 - 1
)

func newPending(p store.Policy) *pending {
	n := p.Buckets
	if n < 1 {
		n = 1
	}
	return &pending{n: int64(n), slots: make([]atomic.Uint64, n)}
}

func (q *pending) slot(idx int64) *atomic.Uint64 {
	i := idx % q.n
	if i < 0 {
		i += q.n
	}
	return &q.slots[i]
}

// add counts one success in bucket idx.
func (q *pending) add(idx int64) { q.addN(idx, 1) }

// restore counts again the successes take returned for bucket idx (a
// report of them failed): each goes back to the bucket it was counted in.
func (q *pending) restore(out []int64, idx int64) {
	for age, n := range out {
		if n > 0 {
			q.addN(idx-int64(age), uint64(n))
		}
	}
}

// addN counts n > 0 successes in bucket idx.
func (q *pending) addN(idx int64, n uint64) {
	s := q.slot(idx)
	epoch := uint64(idx) & pendingEpoch
	for {
		w := s.Load()
		next := epoch<<pendingShift | min(n, pendingCount)
		switch e := w >> pendingShift; {
		case w == 0:
		case e == epoch:
			if w&pendingCount == pendingCount {
				return // saturated
			}
			next = w&^pendingCount | min(w&pendingCount+n, pendingCount)
		case (e-epoch)&pendingEpoch < 1<<15:
			return // a late call: a newer bucket holds the slot
		}
		// A slot of an older bucket holds successes out of the window
		// by now: they are dropped.
		if s.CompareAndSwap(w, next) {
			return
		}
	}
}

// take removes every pending success and returns them by age: out[a] is
// the count of bucket idx-a. It returns nil when none is pending.
func (q *pending) take(idx int64) []int64 {
	var out []int64
	for i := range q.slots {
		w := q.slots[i].Load()
		if w == 0 {
			continue
		}
		w = q.slots[i].Swap(0)
		if age := q.age(w, idx); age < q.n {
			if out == nil {
				out = make([]int64, q.n)
			}
			out[age] += int64(w & pendingCount)
		}
	}
	return out
}

// age returns how many buckets before idx the slot word w's bucket is.
func (q *pending) age(w uint64, idx int64) int64 {
	return int64((uint64(idx) - w>>pendingShift) & pendingEpoch)
}

// total returns the pending successes still in the window of bucket idx.
func (q *pending) total(idx int64) int64 {
	var n int64
	for i := range q.slots {
		if w := q.slots[i].Load(); w != 0 && q.age(w, idx) < q.n {
			n += int64(w & pendingCount)
		}
	}
	return n
}

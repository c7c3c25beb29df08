package manager

import (
	"math/rand/v2"
	"slices"
	"testing"
	"testing/quick"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ns is the instant x nanoseconds after the Unix epoch.
func ns(x int64) time.Time { return time.Unix(0, x) }

// checkHeap fails the test if h breaks the min-heap property.
func checkHeap(t *testing.T, h timerHeap, step string) {
	t.Helper()
	for i := 1; i < len(h); i++ {
		if p := (i - 1) / 2; h[p].at.After(h[i].at) {
			t.Fatalf("%s: heap property broken: h[%d].at=%v > h[%d].at=%v", step, p, h[p].at, i, h[i].at)
		}
	}
}

func TestTimerHeapOrder(t *testing.T) {
	var h timerHeap
	for _, at := range []int64{50, 10, 40, 30, 20, 10, 60, 0, -5} {
		h.push(deadline{at: ns(at), gen: uint64(at + 100)})
		checkHeap(t, h, "push")
	}
	var got []int64
	for len(h) > 0 {
		d := h.pop()
		assert.Equal(t, uint64(d.at.UnixNano()+100), d.gen, "a deadline keeps its fields")
		got = append(got, d.at.UnixNano())
		checkHeap(t, h, "pop")
	}
	assert.Equal(t, []int64{-5, 0, 10, 10, 20, 30, 40, 50, 60}, got)
}

// Popping leaves no reference behind in the slice's spare capacity, so a
// removed breaker can be collected.
func TestTimerHeapPopClearsSlot(t *testing.T) {
	var h timerHeap
	b := &Breaker{}
	h.push(deadline{at: ns(1), b: b})
	h.push(deadline{at: ns(2), b: b})
	h.pop()
	assert.Nil(t, h[:cap(h)][1].b)
	h.pop()
	assert.Nil(t, h[:cap(h)][0].b)
	assert.Empty(t, h)
}

// Against a sorted slice: any sequence of pushes and pops gives the same
// minimum each time.
func TestTimerHeapMatchesSort(t *testing.T) {
	prop := func(ops []int16) bool {
		var h timerHeap
		var ref []int64
		for _, op := range ops {
			if op < 0 && len(ref) > 0 { // a negative op pops
				got := h.pop().at.UnixNano()
				want := ref[0]
				ref = ref[1:]
				if got != want {
					t.Logf("popped %d, want %d", got, want)
					return false
				}
				continue
			}
			at := int64(op % 64) // many equal deadlines
			h.push(deadline{at: ns(at)})
			i, _ := slices.BinarySearch(ref, at)
			ref = slices.Insert(ref, i, at)
		}
		for len(ref) > 0 {
			if got := h.pop().at.UnixNano(); got != ref[0] {
				return false
			}
			ref = ref[1:]
		}
		return len(h) == 0
	}
	cfg := &quick.Config{MaxCount: 2000}
	require.NoError(t, quick.Check(prop, cfg))
}

// A large random run checks the heap property after every operation.
func TestTimerHeapRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h timerHeap
	var ref []int64
	for i := range 20000 {
		if r.IntN(3) == 0 && len(h) > 0 {
			got := h.pop().at.UnixNano()
			if got != ref[0] {
				t.Fatalf("pop %d: got %d, want %d", i, got, ref[0])
			}
			ref = ref[1:]
		} else {
			at := r.Int64N(1 << 40)
			h.push(deadline{at: ns(at)})
			j, _ := slices.BinarySearch(ref, at)
			ref = slices.Insert(ref, j, at)
		}
		if i%97 == 0 {
			checkHeap(t, h, "random run")
			require.Len(t, h, len(ref))
		}
	}
}

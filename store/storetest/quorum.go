package storetest

import (
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/store"
)

// quorum: under a quorum the store counts who reported the failures: of
// the run for a consecutive policy (a success ends both), in the window
// for a window policy; the fleet's trip needs enough of them.
func quorum(t *testing.T, h Harness) {
	s := h.New(t)
	as := func(p store.Policy, reporter string) store.Policy { p.Reporter = reporter; return p }
	c := store.Policy{Failures: 3, Quorum: 2}
	for i := 1; i <= 3; i++ {
		v, err := s.RecordFailure(ctx(t), "run", as(c, "a"), nil)
		if err != nil || v.Failures != int64(i) || v.Processes != 1 {
			t.Fatalf("failure %d of a: %+v, %v; want count %d from 1 process", i, v, err, i)
		}
		if c.Trips(v) {
			t.Fatalf("failure %d of a: %+v trips; one process is short of the quorum", i, v)
		}
	}
	v, err := s.RecordFailure(ctx(t), "run", as(c, "b"), nil)
	if err != nil || v.Failures != 4 || v.Processes != 2 || !c.Trips(v) {
		t.Fatalf("a failure of b after a's three: %+v, %v; want count 4 from 2 processes, tripping", v, err)
	}
	if _, err := s.RecordSuccess(ctx(t), "run", as(c, "b"), nil); err != nil {
		t.Fatal(err)
	}
	if v, err = s.RecordFailure(ctx(t), "run", as(c, "a"), nil); err != nil || v.Failures != 1 || v.Processes != 1 {
		t.Fatalf("after a success: %+v, %v; a new run, from 1 process", v, err)
	}

	w := store.Policy{Rate: 0.5, Period: 10 * time.Second, Buckets: 10, MinCalls: 4, Quorum: 2}
	for i := 1; i <= 4; i++ {
		if v, err = s.RecordFailure(ctx(t), "window", as(w, "a"), nil); err != nil || v.Processes != 1 {
			t.Fatalf("window failure %d of a: %+v, %v; want 1 process", i, v, err)
		}
	}
	noQuorum := w
	noQuorum.Quorum = 0
	if w.Trips(v) || !noQuorum.Trips(v) {
		t.Fatalf("4 failures of a alone: %+v; want the threshold reached, short of the quorum", v)
	}
	if v, err = s.RecordFailure(ctx(t), "window", as(w, "b"), nil); err != nil || v.Processes != 2 || !w.Trips(v) {
		t.Fatalf("a failure of b: %+v, %v; want 2 processes, tripping", v, err)
	}
	if v, err = s.RecordSuccess(ctx(t), "window", as(w, "c"), []int64{1}); err != nil || v.Processes != 2 {
		t.Fatalf("a success report: %+v, %v; it counts no reporter but says how many there are", v, err)
	}
	if h.Real {
		return // the window's end is the store's clock's
	}
	h.Advance(t, 11*time.Second)
	if v, err = s.RecordFailure(ctx(t), "window", as(w, "c"), nil); err != nil || v.Processes != 1 || v.Failures != 1 {
		t.Fatalf("a window later: %+v, %v; a's and b's failures left the window, with them", v, err)
	}
}

package storetest

import (
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/store"
)

// quorum: under a quorum the store counts what each process reported: its
// failures in the run for a consecutive policy (a success ends the run),
// its calls and failures in the window for a window policy. The fleet
// trips only if the threshold is still reached without the Quorum-1
// processes that reported the most.
func quorum(t *testing.T, h Harness) {
	s := h.New(t)
	as := func(p store.Policy, reporter string) store.Policy { p.Reporter = reporter; return p }
	c := store.Policy{Failures: 3, Quorum: 2}
	var v store.Verdict
	var err error
	for i := 1; i <= 5; i++ {
		v, err = s.RecordFailure(ctx(t), "run", as(c, "a"), 1, nil)
		if err != nil || v.Failures != int64(i) || v.Processes != 1 || v.LargestFailures != int64(i) {
			t.Fatalf("failure %d of a: %+v, %v; want count %d from 1 process, all of it a's", i, v, err, i)
		}
		if c.Trips(v) {
			t.Fatalf("failure %d of a: %+v trips; one process alone never opens a fleet of quorum 2", i, v)
		}
	}
	v, err = s.RecordFailure(ctx(t), "run", as(c, "b"), 1, nil)
	if err != nil || v.Failures != 6 || v.Processes != 2 || v.LargestFailures != 5 || c.Trips(v) {
		t.Fatalf("a failure of b after a's five: %+v, %v; want count 6 from 2 processes, not tripping (1 without a)", v, err)
	}
	for i := 2; i <= 3; i++ {
		v, err = s.RecordFailure(ctx(t), "run", as(c, "b"), 1, nil)
	}
	if err != nil || v.Failures != 8 || !c.Trips(v) {
		t.Fatalf("b's third failure: %+v, %v; want count 8, tripping (3 without a)", v, err)
	}
	if _, err := s.RecordSuccess(ctx(t), "run", as(c, "b"), nil); err != nil {
		t.Fatal(err)
	}
	if v, err = s.RecordFailure(ctx(t), "run", as(c, "a"), 1, nil); err != nil || v.Failures != 1 || v.Processes != 1 {
		t.Fatalf("after a success: %+v, %v; a new run, from 1 process", v, err)
	}

	w := store.Policy{Rate: 0.5, Period: 10 * time.Second, Buckets: 10, MinCalls: 4, Quorum: 2}
	for i := 1; i <= 10; i++ {
		if v, err = s.RecordFailure(ctx(t), "window", as(w, "a"), 1, nil); err != nil || v.Processes != 1 {
			t.Fatalf("window failure %d of a: %+v, %v; want 1 process", i, v, err)
		}
	}
	noQuorum := w
	noQuorum.Quorum = 0
	if w.Trips(v) || !noQuorum.Trips(v) {
		t.Fatalf("10 failures of a alone: %+v; want the threshold reached, not without a", v)
	}
	// A healthy process's noise: c reports 2 successes and 1 failure.
	if v, err = s.RecordFailure(ctx(t), "window", as(w, "c"), 1, []int64{2}); err != nil || v.Processes != 2 || w.Trips(v) {
		t.Fatalf("c's noise: %+v, %v; want 2 processes, not tripping (1 of 3 without a)", v, err)
	}
	for i := 1; i <= 4; i++ {
		v, err = s.RecordFailure(ctx(t), "window", as(w, "b"), 1, nil)
	}
	if err != nil || v.Processes != 3 || !w.Trips(v) {
		t.Fatalf("b fails 4 calls too: %+v, %v; want 3 processes, tripping (5 of 7 without a)", v, err)
	}
	if v, err = s.RecordSuccess(ctx(t), "window", as(w, "d"), []int64{1}); err != nil || v.Processes != 3 {
		t.Fatalf("a success report: %+v, %v; it says how many processes reported failures", v, err)
	}
	if h.Real {
		return // the window's end is the store's clock's
	}
	h.Advance(t, 21*time.Second)
	if v, err = s.RecordFailure(ctx(t), "window", as(w, "c"), 1, nil); err != nil || v.Processes != 1 || v.Failures != 1 {
		t.Fatalf("two windows later: %+v, %v; a's and b's failures left the window, with them", v, err)
	}
}

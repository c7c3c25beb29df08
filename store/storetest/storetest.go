// Package storetest is a conformance suite for implementations of
// store.Store: the same scenarios run against the in-memory store and
// against a real Redis, so both keep the same contract.
package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/reasontext"
	"github.com/fusebox-go/fusebox/store"
)

// Harness gives the suite a fresh store and a way to let time pass.
type Harness struct {
	// New returns an empty store for one test.
	New func(t *testing.T) store.Store
	// Advance lets d pass on the store's clock: a mock clock's Add, or, for
	// a store that keeps real time, nothing (the suite then polls, bounded,
	// until the expected state shows).
	Advance func(t *testing.T, d time.Duration)
	// Real is set for a store on the real clock: waits are polls bounded by
	// the durations involved plus Slack.
	Real  bool
	Slack time.Duration
	// Clock returns the clock of the store New returned last, which the
	// managers of a scenario then run on. Nil means the real clock.
	Clock func() clock.Clock
}

// Run runs every scenario as a subtest.
func Run(t *testing.T, h Harness) {
	if h.Slack == 0 {
		h.Slack = 2 * time.Second
	}
	t.Run("ConsecutiveCountsAreNeverLost", func(t *testing.T) { consecutiveNoLoss(t, h) })
	t.Run("SuccessEndsTheRun", func(t *testing.T) { successEndsRun(t, h) })
	t.Run("FirstOpenerStands", func(t *testing.T) { firstOpener(t, h) })
	t.Run("OneProbeLease", func(t *testing.T) { oneProbe(t, h) })
	t.Run("VerdictOnlyFromTheHolder", func(t *testing.T) { verdicts(t, h) })
	t.Run("EpochsFenceLateDecisions", func(t *testing.T) { epochs(t, h) })
	t.Run("WindowPolicy", func(t *testing.T) { window(t, h) })
	t.Run("WatchDeliversChangesInOrder", func(t *testing.T) { watch(t, h) })
	t.Run("WatchNamesFollowsTheList", func(t *testing.T) { watchNames(t, h) })
	t.Run("ForceOpenHoldsUntilReset", func(t *testing.T) { forceOpen(t, h) })
	t.Run("TripsWhereALocalBreakerTrips", func(t *testing.T) { parity(t, h) })
	t.Run("QuorumCountsReporters", func(t *testing.T) { quorum(t, h) })
	t.Run("SlowStartCountsDown", func(t *testing.T) { slowStart(t, h) })
	t.Run("OpeningKeepsItsReason", func(t *testing.T) { reason(t, h) })
	t.Run("ForcingSurvivesDataLoss", func(t *testing.T) { forcingSurvivesDataLoss(t, h) })
	t.Run("ClosedEpochIsNeverTakenForOpened", func(t *testing.T) { closedEpochNotOpened(t, h) })
	t.Run("HalfOpenEndsThePeriod", func(t *testing.T) { halfOpen(t, h) })
}

// forcingSurvivesDataLoss: a store that lost its data and was forced open
// since (an operator's kill switch, in epoch 1) stays forced whatever
// epoch a process from before the loss names: its lease and its opening
// are refused, and the forcing moves to the opened epoch above the
// caller's, announced, so that every process follows it.
func forcingSurvivesDataLoss(t *testing.T, h Harness) {
	s := h.New(t)
	if st, err := s.ForceOpen(ctx(t), "k"); err != nil || st != (store.Status{Epoch: 1, Forced: true}) {
		t.Fatalf("ForceOpen of an empty store: %+v, %v", st, err)
	}
	ok, st, err := s.AcquireProbe(ctx(t), "k", "p", 7, time.Minute)
	if err != nil || ok || st != (store.Status{Epoch: 9, Forced: true}) {
		t.Fatalf("AcquireProbe in epoch 7 of a process from before the loss: won %v, %+v, %v; want refused, forced in epoch 9", ok, st, err)
	}
	st, opened, err := s.Open(ctx(t), "k", 12, time.Minute, store.Reason{By: "late"})
	if err != nil || opened || st != (store.Status{Epoch: 13, Forced: true}) {
		t.Fatalf("Open from epoch 12: opened %v, %+v, %v; want refused, forced in epoch 13", opened, st, err)
	}
	h.Advance(t, time.Hour)
	if got := status(t, s, "k"); got != (store.Status{Epoch: 13, Forced: true}) {
		t.Fatalf("an hour later: %+v, want forced in epoch 13", got)
	}
	if st, err := s.Reset(ctx(t), "k"); err != nil || st != (store.Status{Epoch: 14}) {
		t.Fatalf("Reset: %+v, %v; want closed epoch 14", st, err)
	}
}

// closedEpochNotOpened: a process in a closed epoch ahead of a store that
// lost its data (it went half-open on its own) asks for a lease in it: the
// store takes that closed epoch, with no open marker, which in a closed
// epoch would be a slow start nothing earned.
func closedEpochNotOpened(t *testing.T, h Harness) {
	s := h.New(t)
	ok, st, err := s.AcquireProbe(ctx(t), "e", "p", 6, time.Minute)
	if err != nil || ok || st != (store.Status{Epoch: 6}) {
		t.Fatalf("AcquireProbe in closed epoch 6 of an empty store: won %v, %+v, %v; want refused, closed in epoch 6 with no slow start", ok, st, err)
	}
	ok, st, err = s.AcquireProbe(ctx(t), "e", "p", 7, time.Minute)
	if err != nil || ok || !st.Opened() || st.Epoch != 7 || st.Open <= 0 || st.Open > time.Minute {
		t.Fatalf("AcquireProbe in opened epoch 7 ahead of the store: won %v, %+v, %v; want refused, held open for the lease in epoch 7", ok, st, err)
	}
}

// reason: an opening keeps who opened the breaker and why, on one line,
// for its whole opened epoch: in every status, every reply and the change
// that announces it; a failed probe's opening has its own; a closing and a
// forcing have none.
func reason(t *testing.T, h Harness) {
	s := h.New(t)
	const name = "svc|odd:name}"
	wctx, cancel := context.WithCancel(context.Background())
	changes := make(chan store.Change, 64)
	done := make(chan error, 1)
	subscribed := make(chan struct{})
	go func() { done <- s.Watch(wctx, func() { close(subscribed) }, func(c store.Change) { changes <- c }) }()
	defer func() {
		cancel()
		<-done
	}()
	select {
	case <-subscribed:
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not call ready within 5s")
	}
	// next returns the next change of name.
	next := func(what string) store.Change {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case c := <-changes:
				if c.Name == name {
					return c
				}
			case <-deadline:
				t.Fatalf("%s: no change within 5s", what)
			}
		}
	}
	web7 := store.Reason{By: "web-7", Why: "dial tcp: connect:\nconnection refused"}
	want7 := store.Reason{By: "web-7", Why: "dial tcp: connect: connection refused"}
	st, ok, err := s.Open(ctx(t), name, 0, 100*time.Millisecond, web7)
	if err != nil || !ok {
		t.Fatal("Open", ok, err)
	}
	if st.Reason != want7 {
		t.Errorf("Open's status: Reason %+v, want %+v", st.Reason, want7)
	}
	if c := next("the opening"); c.Kind != store.Opened || c.Reason != want7 {
		t.Errorf("the opening's change: %+v, want Reason %+v", c, want7)
	}
	if got := status(t, s, name).Reason; got != want7 {
		t.Errorf("Status while open: Reason %+v, want %+v", got, want7)
	}
	if v, err := s.RecordFailure(ctx(t), name, consecutive, 1, nil); err != nil || v.Reason != want7 {
		t.Errorf("RecordFailure while open: %+v, %v; want Reason %+v", v, err, want7)
	}
	if _, st, err := s.AcquireProbe(ctx(t), name, "x", 1, time.Minute); err != nil || st.Reason != want7 {
		t.Errorf("AcquireProbe while open: %+v, %v; want Reason %+v", st, err, want7)
	}
	h.Advance(t, 100*time.Millisecond)
	eventually(t, h, 100*time.Millisecond, "the open period ends", func() bool { return status(t, s, name).Open == 0 })
	if got := status(t, s, name).Reason; got != want7 {
		t.Errorf("Status once half-open: Reason %+v, want %+v", got, want7)
	}
	ok, st, err = s.AcquireProbe(ctx(t), name, "web-8/1", 1, time.Minute)
	if err != nil || !ok || st.Reason != want7 {
		t.Fatalf("AcquireProbe: %v %+v %v; want the lease, and Reason %+v", ok, st, err, want7)
	}
	if c := next("the lease"); c.Kind != store.Leased || c.Epoch != 1 || c.Probe != time.Minute {
		t.Errorf("the lease's change: %+v, want leased in epoch 1 for 1m", c)
	}
	long := strings.Repeat("é", reasontext.Max)
	st, ok, err = s.Resolve(ctx(t), name, "web-8/1", 1, classify.Failure, time.Minute, store.Reason{By: "web-8", Why: long})
	if err != nil || !ok {
		t.Fatal("Resolve", ok, err)
	}
	want8 := store.Reason{By: "web-8", Why: reasontext.Line(long, reasontext.Max)}
	if st.Reason != want8 || len(st.Reason.Why) > reasontext.Max {
		t.Errorf("a failed probe's status: Reason %+v, want %+v (at most %d bytes)", st.Reason, want8, reasontext.Max)
	}
	if c := next("the failed probe"); c.Kind != store.Opened || c.Reason != want8 {
		t.Errorf("the failed probe's change: %+v, want Reason %+v", c, want8)
	}
	if got := status(t, s, name).Reason; got != want8 {
		t.Errorf("Status after the failed probe: Reason %+v, want %+v", got, want8)
	}
	if st, err := s.ForceOpen(ctx(t), name); err != nil || st.Reason != (store.Reason{}) {
		t.Errorf("ForceOpen: %+v, %v; want no Reason", st, err)
	}
	if got := status(t, s, name).Reason; got != (store.Reason{}) {
		t.Errorf("Status while forced: Reason %+v, want none", got)
	}
	if _, err := s.Reset(ctx(t), name); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open(ctx(t), name, status(t, s, name).Epoch, time.Minute, store.Reason{}); err != nil {
		t.Fatal(err)
	}
	if got := status(t, s, name).Reason; got != (store.Reason{}) {
		t.Errorf("an opening without a Reason: %+v, want none (not the last one's)", got)
	}
}

var consecutive = store.Policy{Failures: 1000}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// eventually polls cond until it holds or within has passed (plus the
// harness's slack); on a mock clock cond must hold at once.
func eventually(t *testing.T, h Harness, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !h.Real {
		if !cond() {
			t.Fatalf("%s: not so after advancing the clock", what)
		}
		return
	}
	deadline := time.Now().Add(within + h.Slack)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so within %v", what, within+h.Slack)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func status(t *testing.T, s store.Store, name string) store.Status {
	t.Helper()
	st, err := s.Status(ctx(t), []string{name})
	if err != nil {
		t.Fatalf("Status(%q): %v", name, err)
	}
	return st[0]
}

func consecutiveNoLoss(t *testing.T, h Harness) {
	s := h.New(t)
	const workers, each = 8, 125
	counts := make(chan int64, workers*each)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range each {
				v, err := s.RecordFailure(ctx(t), "svc", consecutive, 1, nil)
				if err != nil {
					t.Errorf("RecordFailure: %v", err)
					return
				}
				counts <- v.Failures
			}
		}()
	}
	close(start)
	wg.Wait()
	close(counts)
	var got []int64
	for c := range counts {
		got = append(got, c)
	}
	slices.Sort(got)
	for i, c := range got {
		if c != int64(i+1) {
			t.Fatalf("concurrent failures returned counts %v...; want each of 1..%d exactly once (first gap at position %d: %d)", got[:min(len(got), 10)], workers*each, i, c)
		}
	}
	if len(got) != workers*each {
		t.Fatalf("got %d counts, want %d", len(got), workers*each)
	}
	if !consecutive.Trips(store.Verdict{Failures: got[len(got)-1]}) || consecutive.Trips(store.Verdict{Failures: got[len(got)-2]}) {
		t.Fatalf("policy %+v: the %dth failure must be the first to trip", consecutive, consecutive.Failures)
	}
}

func successEndsRun(t *testing.T, h Harness) {
	s := h.New(t)
	p := store.Policy{Failures: 3}
	for i := 1; i <= 2; i++ {
		v, err := s.RecordFailure(ctx(t), "svc", p, 1, nil)
		if err != nil || v.Failures != int64(i) {
			t.Fatalf("failure %d: got %+v, %v; want count %d", i, v, err, i)
		}
	}
	if _, err := s.RecordSuccess(ctx(t), "svc", p, []int64{1}); err != nil {
		t.Fatalf("RecordSuccess: %v", err)
	}
	v, err := s.RecordFailure(ctx(t), "svc", p, 1, nil)
	if err != nil || v.Failures != 1 {
		t.Fatalf("failure after a success: got %+v, %v; want count 1", v, err)
	}
	if other, err := s.RecordFailure(ctx(t), "other", p, 1, nil); err != nil || other.Failures != 1 {
		t.Fatalf("another breaker's count: got %+v, %v; want 1", other, err)
	}
}

func firstOpener(t *testing.T, h Harness) {
	s := h.New(t)
	const period = 300 * time.Millisecond
	st, opened, err := s.Open(ctx(t), "svc", 0, period, store.Reason{})
	if err != nil || !opened || st.Open != period || st.Epoch != 1 {
		t.Fatalf("first Open: got %+v, %v, %v; want open %v in epoch 1", st, opened, err, period)
	}
	st2, opened2, err := s.Open(ctx(t), "svc", 0, 10*period, store.Reason{})
	if err != nil || opened2 || st2.Open <= 0 || st2.Open > period || st2.Epoch != 1 {
		t.Fatalf("second Open from the same closed epoch: got %+v, %v, %v; want the first period's remainder (<= %v) in epoch 1", st2, opened2, err, period)
	}
	if st := status(t, s, "svc"); st.Open <= 0 || st.Open > period || !st.Opened() {
		t.Fatalf("Status while open: %+v", st)
	}
	v, err := s.RecordFailure(ctx(t), "svc", store.Policy{Failures: 5}, 1, nil)
	if err != nil || v.Open <= 0 || !v.Opened() {
		t.Fatalf("a failure while open must report the open status: %+v, %v", v, err)
	}
	h.Advance(t, period)
	eventually(t, h, period, "the open marker expires", func() bool { return status(t, s, "svc").Open == 0 })
	if _, opened, err := s.Open(ctx(t), "svc", 0, period, store.Reason{}); err != nil || opened {
		t.Fatalf("Open from closed epoch 0 after the breaker opened in epoch 1: opened=%v err=%v; want refused (a late opening)", opened, err)
	}
	if st := status(t, s, "svc"); st.Epoch != 1 {
		t.Fatalf("a refused Open changed the epoch: %+v", st)
	}
}

func oneProbe(t *testing.T, h Harness) {
	s := h.New(t)
	const period, lease = 200 * time.Millisecond, 400 * time.Millisecond
	st, _, err := s.Open(ctx(t), "svc", 0, period, store.Reason{})
	if err != nil {
		t.Fatal(err)
	}
	e := st.Epoch
	ok, st, err := s.AcquireProbe(ctx(t), "svc", "early", e, lease)
	if err != nil || ok || st.Open <= 0 {
		t.Fatalf("AcquireProbe while open: got %v, %+v, %v; want refused with the open period", ok, st, err)
	}
	h.Advance(t, period)
	eventually(t, h, period, "the open period ends", func() bool { return status(t, s, "svc").Open == 0 })
	if ok, _, err := s.AcquireProbe(ctx(t), "svc", "stale", e-1, lease); err != nil || ok {
		t.Fatalf("AcquireProbe from the closed epoch before: %v, %v; want refused", ok, err)
	}

	const racers = 50
	var wg sync.WaitGroup
	var mu sync.Mutex
	winners := 0
	start := make(chan struct{})
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ok, st, err := s.AcquireProbe(ctx(t), "svc", fmt.Sprintf("t%d", i), e, lease)
			if err != nil {
				t.Errorf("AcquireProbe: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if ok {
				winners++
			} else if st.Probe <= 0 {
				t.Errorf("a refused AcquireProbe must say how long the lease runs: %+v", st)
			}
		}()
	}
	close(start)
	wg.Wait()
	if winners != 1 {
		t.Fatalf("%d racers won the probe lease; want exactly 1", winners)
	}
	h.Advance(t, lease)
	eventually(t, h, lease, "the lease expires", func() bool { return status(t, s, "svc").Probe == 0 })
	if ok, _, err := s.AcquireProbe(ctx(t), "svc", "next", e, lease); err != nil || !ok {
		t.Fatalf("AcquireProbe after the lease expired: %v, %v; want it won", ok, err)
	}
}

func verdicts(t *testing.T, h Harness) {
	s := h.New(t)
	const lease = 5 * time.Second
	p := store.Policy{Failures: 3}
	for range 2 {
		if _, err := s.RecordFailure(ctx(t), "svc", p, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	st, _, err := s.Open(ctx(t), "svc", 0, time.Millisecond, store.Reason{})
	if err != nil {
		t.Fatal(err)
	}
	e := st.Epoch
	h.Advance(t, time.Millisecond)
	eventually(t, h, time.Millisecond, "the open period ends", func() bool { return status(t, s, "svc").Open == 0 })
	if ok, _, err := s.AcquireProbe(ctx(t), "svc", "holder", e, lease); err != nil || !ok {
		t.Fatalf("AcquireProbe: %v, %v", ok, err)
	}
	if _, applied, err := s.Resolve(ctx(t), "svc", "intruder", e, classify.Success, 0, store.Reason{}); err != nil || applied {
		t.Fatalf("Resolve by a non-holder: applied=%v err=%v; want refused", applied, err)
	}
	if _, applied, err := s.Resolve(ctx(t), "svc", "holder", e+2, classify.Success, 0, store.Reason{}); err != nil || applied {
		t.Fatalf("Resolve by the holder in another epoch: applied=%v err=%v; want refused", applied, err)
	}
	st, applied, err := s.Resolve(ctx(t), "svc", "holder", e, classify.Failure, time.Minute, store.Reason{})
	if err != nil || !applied || st.Epoch != e+2 || !st.Opened() {
		t.Fatalf("Resolve failure by the holder: %+v, applied=%v err=%v; want applied, reopened in epoch %d", st, applied, err, e+2)
	}
	if st := status(t, s, "svc"); st.Open <= 50*time.Second || st.Probe != 0 || st.Epoch != e+2 {
		t.Fatalf("after a failed probe: %+v; want open about a minute in epoch %d and no lease", st, e+2)
	}
	if _, applied, err := s.Resolve(ctx(t), "svc", "holder", e, classify.Success, 0, store.Reason{}); err != nil || applied {
		t.Fatalf("a second verdict from the same token: applied=%v err=%v; want refused", applied, err)
	}

	// A probe released with Ignore gives the lease back; a success closes
	// and clears the run of failures.
	s2 := h.New(t)
	st, _, _ = s2.Open(ctx(t), "svc", 0, time.Millisecond, store.Reason{})
	e = st.Epoch
	h.Advance(t, time.Millisecond)
	eventually(t, h, time.Millisecond, "the open period ends", func() bool { return status(t, s2, "svc").Open == 0 })
	if ok, _, _ := s2.AcquireProbe(ctx(t), "svc", "a", e, lease); !ok {
		t.Fatal("AcquireProbe a")
	}
	if st, applied, err := s2.Resolve(ctx(t), "svc", "a", e, classify.Ignore, 0, store.Reason{}); err != nil || !applied || st.Epoch != e {
		t.Fatalf("Resolve ignore: %+v, %v, %v; want applied in the same epoch", st, applied, err)
	}
	if ok, _, err := s2.AcquireProbe(ctx(t), "svc", "b", e, lease); err != nil || !ok {
		t.Fatalf("AcquireProbe after an ignored probe: %v, %v; want it won", ok, err)
	}
	for range 2 {
		if _, err := s2.RecordFailure(ctx(t), "svc", p, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	if st, applied, err := s2.Resolve(ctx(t), "svc", "b", e, classify.Success, 0, store.Reason{}); err != nil || !applied || st.Epoch != e+1 || st.Opened() {
		t.Fatalf("Resolve success: %+v, %v, %v; want applied, closed in epoch %d", st, applied, err, e+1)
	}
	if st := status(t, s2, "svc"); st != (store.Status{Epoch: e + 1}) {
		t.Fatalf("after a successful probe: %+v; want closed in epoch %d, nothing open or leased", st, e+1)
	}
	if v, err := s2.RecordFailure(ctx(t), "svc", p, 1, nil); err != nil || v.Failures != 1 {
		t.Fatalf("first failure after closing: %+v, %v; want count 1", v, err)
	}
}

// epochs checks the fencing: an opening from an older closed epoch ends no
// lease and changes nothing, a stale verdict changes nothing, and a store
// behind its caller (it lost its data) adopts the caller's epoch and holds
// the fleet off for one lease before granting another.
func epochs(t *testing.T, h Harness) {
	s := h.New(t)
	const lease = 300 * time.Millisecond
	st, _, _ := s.Open(ctx(t), "svc", 0, time.Millisecond, store.Reason{})
	e := st.Epoch
	h.Advance(t, time.Millisecond)
	eventually(t, h, time.Millisecond, "the open period ends", func() bool { return status(t, s, "svc").Open == 0 })
	if ok, _, err := s.AcquireProbe(ctx(t), "svc", "p", e, lease); err != nil || !ok {
		t.Fatalf("AcquireProbe: %v, %v", ok, err)
	}
	// A replica that missed the opening trips in the old closed epoch:
	// its opening is late and must not end the probe.
	if st, opened, err := s.Open(ctx(t), "svc", e-1, time.Hour, store.Reason{}); err != nil || opened || st.Probe <= 0 || st.Epoch != e {
		t.Fatalf("a late Open during a probe: %+v, opened=%v, %v; want refused, the lease intact", st, opened, err)
	}
	if _, applied, err := s.Resolve(ctx(t), "svc", "p", e, classify.Success, 0, store.Reason{}); err != nil || !applied {
		t.Fatalf("the probe's verdict after a late Open: %v, %v; want applied", applied, err)
	}
	// The data is lost (a restart, FLUSHALL): the store is behind.
	lost := h.New(t)
	ok, st, err := lost.AcquireProbe(ctx(t), "svc", "q", 7, lease)
	if err != nil || ok || st.Epoch != 7 || st.Open <= 0 {
		t.Fatalf("AcquireProbe ahead of a store that lost its data: %v, %+v, %v; want refused, epoch 7 adopted, held open for the lease", ok, st, err)
	}
	if ok, _, err := lost.AcquireProbe(ctx(t), "svc", "r", 7, lease); err != nil || ok {
		t.Fatalf("a second AcquireProbe within that lease: %v, %v; want refused (a probe from before the loss may still run)", ok, err)
	}
	h.Advance(t, lease)
	eventually(t, h, lease, "the hold ends", func() bool { return status(t, lost, "svc").Open == 0 })
	if ok, _, err := lost.AcquireProbe(ctx(t), "svc", "r", 7, lease); err != nil || !ok {
		t.Fatalf("AcquireProbe after the hold: %v, %v; want it won", ok, err)
	}
	// Reset closes from any state into a new closed epoch, ending the
	// lease: the holder's verdict is then stale.
	if st, err := lost.Reset(ctx(t), "svc"); err != nil || st != (store.Status{Epoch: 8}) {
		t.Fatalf("Reset while probing: %+v, %v; want closed in epoch 8", st, err)
	}
	if _, applied, err := lost.Resolve(ctx(t), "svc", "r", 7, classify.Failure, time.Hour, store.Reason{}); err != nil || applied {
		t.Fatalf("a verdict after a Reset: applied=%v, %v; want stale", applied, err)
	}
	if st, err := lost.Reset(ctx(t), "svc"); err != nil || st.Epoch != 10 {
		t.Fatalf("Reset of a closed breaker: %+v, %v; want the next closed epoch, 10", st, err)
	}
}

func window(t *testing.T, h Harness) {
	s := h.New(t)
	p := store.Policy{Rate: 0.5, Period: 10 * time.Second, Buckets: 10, MinCalls: 10}
	if v, err := s.RecordSuccess(ctx(t), "svc", p, []int64{6}); err != nil || v.Calls != 6 || v.Failures != 0 {
		t.Fatalf("RecordSuccess of 6: %+v, %v; want 6 calls, no failure", v, err)
	}
	var v store.Verdict
	var err error
	for i := 1; i <= 5; i++ {
		if v, err = s.RecordFailure(ctx(t), "svc", p, 1, nil); err != nil {
			t.Fatal(err)
		}
		if v.Calls != int64(6+i) || v.Failures != int64(i) {
			t.Fatalf("after %d failures and 6 successes: %+v", i, v)
		}
		want := i >= 6 // 6 of 12 would be needed
		if p.Trips(v) != want {
			t.Fatalf("after %d failures: Trips(%+v) = %v", i, v, p.Trips(v))
		}
	}
	if v, err = s.RecordFailure(ctx(t), "svc", p, 1, []int64{1}); err != nil {
		t.Fatal(err)
	}
	if v.Calls != 13 || v.Failures != 6 || p.Trips(v) {
		t.Fatalf("6 failures of 13 calls: %+v (trips %v); want not tripped", v, p.Trips(v))
	}
	if v, err = s.RecordFailure(ctx(t), "svc", p, 1, nil); err != nil {
		t.Fatal(err)
	}
	if !p.Trips(v) {
		t.Fatalf("7 failures of 14 calls: %+v; want tripped at rate 0.5", v)
	}
}

func watch(t *testing.T, h Harness) {
	s := h.New(t)
	wctx, cancel := context.WithCancel(context.Background())
	changes := make(chan store.Change, 16)
	done := make(chan error, 1)
	subscribed := make(chan struct{})
	go func() { done <- s.Watch(wctx, func() { close(subscribed) }, func(c store.Change) { changes <- c }) }()
	select {
	case <-subscribed:
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not call ready within 5s")
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch after cancel: %v; want nil", err)
		}
	}()
	// The subscription may take a moment to be in place: open and close a
	// breaker until its changes arrive, then check a scripted sequence.
	deadline := time.Now().Add(5 * time.Second)
	for attempt := 0; ; attempt++ {
		ready := fmt.Sprintf("ready-%d", attempt)
		if _, _, err := s.Open(ctx(t), ready, 0, time.Hour, store.Reason{}); err != nil {
			t.Fatal(err)
		}
		select {
		case c := <-changes:
			if !strings.HasPrefix(c.Name, "ready-") || c.Kind != store.Opened {
				t.Fatalf("first change: %+v", c)
			}
		case <-time.After(50 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("Watch delivered nothing within 5s")
			}
			continue
		}
		break
	}
	const lease = time.Minute
	if _, _, err := s.Open(ctx(t), "svc", 0, time.Hour, store.Reason{}); err != nil {
		t.Fatal(err)
	}
	s2 := "svc2"
	if _, _, err := s.Open(ctx(t), s2, 0, time.Millisecond, store.Reason{}); err != nil {
		t.Fatal(err)
	}
	h.Advance(t, time.Millisecond)
	eventually(t, h, time.Millisecond, "the open period ends", func() bool { return status(t, s, s2).Open == 0 })
	if ok, _, err := s.AcquireProbe(ctx(t), s2, "x", 1, lease); err != nil || !ok {
		t.Fatal("AcquireProbe", ok, err)
	}
	if _, _, err := s.Resolve(ctx(t), s2, "x", 1, classify.Ignore, 0, store.Reason{}); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := s.AcquireProbe(ctx(t), s2, "x", 1, lease); err != nil || !ok {
		t.Fatal("AcquireProbe", ok, err)
	}
	if _, _, err := s.Resolve(ctx(t), s2, "x", 1, classify.Success, 0, store.Reason{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open(ctx(t), s2, 2, time.Millisecond, store.Reason{}); err != nil {
		t.Fatal(err)
	}
	h.Advance(t, time.Millisecond)
	eventually(t, h, time.Millisecond, "the open period ends", func() bool { return status(t, s, s2).Open == 0 })
	if ok, _, err := s.AcquireProbe(ctx(t), s2, "y", 3, lease); err != nil || !ok {
		t.Fatal("AcquireProbe", ok, err)
	}
	if _, _, err := s.Resolve(ctx(t), s2, "y", 3, classify.Failure, 2*time.Second, store.Reason{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForceOpen(ctx(t), s2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reset(ctx(t), s2); err != nil {
		t.Fatal(err)
	}
	want := []store.Change{
		{Name: "svc", Kind: store.Opened, Epoch: 1, Open: time.Hour},
		{Name: s2, Kind: store.Opened, Epoch: 1, Open: time.Millisecond},
		{Name: s2, Kind: store.Leased, Epoch: 1, Probe: lease},
		{Name: s2, Kind: store.Released, Epoch: 1},
		{Name: s2, Kind: store.Leased, Epoch: 1, Probe: lease},
		{Name: s2, Kind: store.Closed, Epoch: 2},
		{Name: s2, Kind: store.Opened, Epoch: 3, Open: time.Millisecond},
		{Name: s2, Kind: store.Leased, Epoch: 3, Probe: lease},
		{Name: s2, Kind: store.Opened, Epoch: 5, Open: 2 * time.Second},
		{Name: s2, Kind: store.Forced, Epoch: 7},
		{Name: s2, Kind: store.Reset, Epoch: 8},
	}
	next := func() (store.Change, bool) {
		for {
			select {
			case c := <-changes:
				if strings.HasPrefix(c.Name, "ready-") {
					continue // a late answer to the readiness loop
				}
				return c, true
			case <-time.After(5 * time.Second):
				return store.Change{}, false
			}
		}
	}
	for i, w := range want {
		c, ok := next()
		if !ok {
			t.Fatalf("change %d (%+v) not delivered within 5s", i, w)
		}
		if c != w {
			t.Fatalf("change %d: got %+v, want %+v", i, c, w)
		}
	}
}

// forceOpen: ForceOpen moves the breaker to a new opened epoch that no
// period ends and no probe can take, fences the decisions of the epochs
// before (an opening, a probe's verdict), and lasts until Reset.
func forceOpen(t *testing.T, h Harness) {
	s := h.New(t)
	const lease = time.Minute
	st, err := s.ForceOpen(ctx(t), "f")
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.Status{Epoch: 1, Forced: true}); st != want {
		t.Fatalf("ForceOpen from closed: %+v, want %+v", st, want)
	}
	if st, err = s.ForceOpen(ctx(t), "f"); err != nil || st.Epoch != 1 || !st.Forced {
		t.Fatalf("ForceOpen again: %+v, %v; want it unchanged in epoch 1", st, err)
	}
	if st, opened, err := s.Open(ctx(t), "f", 0, time.Millisecond, store.Reason{}); err != nil || opened || !st.Forced {
		t.Fatalf("Open from the epoch before: opened %v, %+v, %v; want it fenced", opened, st, err)
	}
	h.Advance(t, time.Hour) // no period ends a forcing
	if ok, st, err := s.AcquireProbe(ctx(t), "f", "p", 1, lease); err != nil || ok || !st.Forced {
		t.Fatalf("AcquireProbe while forced: won %v, %+v, %v; want refused", ok, st, err)
	}
	if v, err := s.RecordFailure(ctx(t), "f", consecutive, 1, nil); err != nil || !v.Forced || !v.Opened() {
		t.Fatalf("RecordFailure while forced: %+v, %v; want the forced status", v, err)
	}
	if got := status(t, s, "f"); !got.Forced || got.Epoch != 1 {
		t.Fatalf("Status while forced: %+v", got)
	}
	if st, err = s.Reset(ctx(t), "f"); err != nil || st.Epoch != 2 || st.Forced {
		t.Fatalf("Reset: %+v, %v; want closed epoch 2", st, err)
	}
	if got := status(t, s, "f"); got.Forced || got.Opened() {
		t.Fatalf("Status after Reset: %+v", got)
	}

	// Forcing an opened breaker while a probe is out fences the probe.
	if _, _, err := s.Open(ctx(t), "g", 0, time.Millisecond, store.Reason{}); err != nil {
		t.Fatal(err)
	}
	h.Advance(t, time.Millisecond)
	eventually(t, h, time.Millisecond, "the open period ends", func() bool { return status(t, s, "g").Open == 0 })
	if ok, _, err := s.AcquireProbe(ctx(t), "g", "p", 1, lease); err != nil || !ok {
		t.Fatal("AcquireProbe", ok, err)
	}
	if st, err = s.ForceOpen(ctx(t), "g"); err != nil || st.Epoch != 3 || !st.Forced || st.Probe != 0 {
		t.Fatalf("ForceOpen while probing: %+v, %v; want forced in epoch 3 with no lease", st, err)
	}
	if st, applied, err := s.Resolve(ctx(t), "g", "p", 1, classify.Success, 0, store.Reason{}); err != nil || applied || !st.Forced {
		t.Fatalf("the fenced probe's success: applied %v, %+v, %v; want it stale", applied, st, err)
	}
	if got := status(t, s, "g"); !got.Forced || got.Epoch != 3 {
		t.Fatalf("after the fenced verdict: %+v", got)
	}
}

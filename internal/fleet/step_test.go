package fleet_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/fleet"
	"github.com/fusebox-go/fusebox/store"
)

var errDown = errors.New("connection refused")

// Fixed instants and configurations of the step's tables.
var (
	consec = store.Policy{Failures: 3}
	window = store.Policy{Rate: 0.5, Period: 10 * time.Second, Buckets: 10, MinCalls: 4}
	t2     = t0.Add(2 * time.Second)
)

// st is a state of a consecutive breaker, local fallback, in epoch e.
func st(e uint64) fleet.State { return fleet.State{Policy: consec, Epoch: e} }

// view is the machine in state s at generation gen, until until.
func view(s breaker.State, gen uint64, until time.Time) fleet.View {
	return fleet.View{State: s, Gen: gen, Until: until, Asked: 7}
}

func lease(gen uint64, token string, epoch uint64) fleet.Lease {
	return fleet.Lease{Gen: gen, Token: token, Epoch: epoch, For: time.Minute}
}

// with returns s changed by f: a row's expected state is its input with
// what the step changes.
func with(s fleet.State, f func(*fleet.State)) fleet.State {
	f(&s)
	return s
}

func TestStep(t *testing.T) {
	heldA := lease(5, "a", 3)
	tests := []struct {
		name  string
		s     fleet.State
		v     fleet.View
		now   time.Time
		msg   fleet.Msg
		wantS fleet.State
		wantA fleet.Actions
	}{
		// Outcomes in the closed state: what reaches the store.
		{"a failure is reported", st(2), view(C, 4, time.Time{}), t0,
			fleet.Outcome{Gen: 4, Outcome: classify.Failure},
			st(2), fleet.Actions{Report: fleet.ReportFailure}},
		{"a success with no failure reported before: nothing", st(2), view(C, 4, time.Time{}), t0,
			fleet.Outcome{Gen: 4, Outcome: classify.Success},
			st(2), fleet.Actions{}},
		{"the first success after failures ends the shared run", with(st(2), func(s *fleet.State) { s.Dirty = true }), view(C, 4, time.Time{}), t0,
			fleet.Outcome{Gen: 4, Outcome: classify.Success},
			st(2), fleet.Actions{Report: fleet.ReportSuccess}},
		{"a window's success that may trip is reported", fleet.State{Policy: window}, view(C, 4, time.Time{}), t0,
			fleet.Outcome{Gen: 4, Outcome: classify.Success},
			fleet.State{Policy: window}, fleet.Actions{Report: fleet.ReportSuccess}},
		{"an ignored call: nothing", st(2), view(C, 4, time.Time{}), t0,
			fleet.Outcome{Gen: 4, Outcome: classify.Ignore},
			st(2), fleet.Actions{}},
		{"store down, local fallback: the local count trips", with(st(2), func(s *fleet.State) { s.Down = true }), view(C, 4, time.Time{}), t0,
			fleet.Outcome{Gen: 4, Outcome: classify.Failure, LocalTrip: true},
			with(st(2), func(s *fleet.State) { s.Down = true }), fleet.Actions{Trip: true}},
		{"store down, failing closed: nothing trips", fleet.State{Policy: consec, Fallback: store.FailClosed, Down: true}, view(O, 4, time.Time{}), t0,
			fleet.Outcome{Gen: 4, Outcome: classify.Failure, LocalTrip: true},
			fleet.State{Policy: consec, Fallback: store.FailClosed, Down: true}, fleet.Actions{}},

		// The store's verdicts.
		{"a failure below the threshold", st(2), view(C, 4, time.Time{}), t0,
			fleet.Recorded{Gen: 4, Failure: true, Verdict: store.Verdict{Failures: 2, Status: store.Status{Epoch: 2}}, At: t0},
			with(st(2), func(s *fleet.State) { s.Dirty = true }), fleet.Actions{}},
		{"the failure that reaches the threshold trips, in the epoch the store counted it in", st(2), view(C, 4, time.Time{}), t0,
			fleet.Recorded{Gen: 4, Failure: true, Verdict: store.Verdict{Failures: 3, Status: store.Status{Epoch: 4}}, At: t0},
			with(st(4), func(s *fleet.State) { s.Dirty, s.EpochAt, s.Tripped = true, 7, fleet.Trip{Gen: 5, Epoch: 4} }), fleet.Actions{Trip: true}},
		{"a failure while the fleet is open follows it", st(2), view(C, 4, time.Time{}), t1,
			fleet.Recorded{Gen: 4, Failure: true, Verdict: store.Verdict{Failures: 9, Status: store.Status{Epoch: 3, Open: 30 * time.Second}}, At: t0},
			with(st(3), func(s *fleet.State) { s.Dirty, s.EpochAt = true, 7 }),
			fleet.Actions{Move: &fleet.Move{Gen: 4, State: O, Until: t0.Add(30 * time.Second), Hold: 29 * time.Second}}},
		{"a window's verdict keeps its counts", fleet.State{Policy: window}, view(C, 4, time.Time{}), t0,
			fleet.Recorded{Gen: 4, Verdict: store.Verdict{Calls: 3, Failures: 1}, At: t0},
			fleet.State{Policy: window, Calls: 3, Failures: 1}, fleet.Actions{}},
		{"a failed report falls back; the local count trips", st(2), view(C, 4, time.Time{}), t0,
			fleet.Recorded{Gen: 4, Failure: true, LocalTrip: true, Err: errDown, At: t0},
			with(st(2), func(s *fleet.State) { s.Down, s.DownAt = true, 7 }),
			fleet.Actions{Trip: true, Lost: true, FellBack: errDown}},
		{"a failed success report: the next success ends the run", st(2), view(C, 4, time.Time{}), t0,
			fleet.Recorded{Gen: 4, Err: errDown, At: t0},
			with(st(2), func(s *fleet.State) { s.Dirty, s.Down, s.DownAt = true, true, 7 }),
			fleet.Actions{Lost: true, FellBack: errDown}},

		// The probe's lease.
		{"the caller that won the local probe asks for the lease Recover decided", with(st(3), func(s *fleet.State) { s.Lease = time.Minute }), view(P, 5, time.Time{}), t0,
			fleet.ProbeWon{Gen: 5, Token: "a"},
			with(st(3), func(s *fleet.State) { s.Lease, s.Acquiring = time.Minute, heldA }),
			fleet.Actions{Acquire: &fleet.AcquireCall{Token: "a", Epoch: 3, Lease: time.Minute}}},
		{"no lease decided yet: the default", st(3), view(P, 5, time.Time{}), t0,
			fleet.ProbeWon{Gen: 5, Token: "a"},
			with(st(3), func(s *fleet.State) { s.Acquiring = fleet.Lease{Gen: 5, Token: "a", Epoch: 3, For: fleet.DefaultLease} }),
			fleet.Actions{Acquire: &fleet.AcquireCall{Token: "a", Epoch: 3, Lease: fleet.DefaultLease}}},
		{"store down: the local probe goes ahead for its lease", with(st(3), func(s *fleet.State) { s.Down, s.Lease = true, time.Minute }), view(P, 5, time.Time{}), t0,
			fleet.ProbeWon{Gen: 5, Token: "a"},
			with(st(3), func(s *fleet.State) { s.Down, s.Lease = true, time.Minute }), fleet.Actions{Hold: time.Minute}},
		{"the lease won is held", with(st(3), func(s *fleet.State) { s.Acquiring = heldA }), view(P, 5, time.Time{}), t0,
			fleet.ProbeReply{Lease: heldA, Won: true, Status: store.Status{Epoch: 3, Probe: time.Minute}, At: t0},
			with(st(3), func(s *fleet.State) { s.Held = heldA }), fleet.Actions{Hold: time.Minute}},
		{"another process holds the lease: declined, probing for its time", with(st(3), func(s *fleet.State) { s.Acquiring = heldA }), view(P, 5, time.Time{}), t0,
			fleet.ProbeReply{Lease: heldA, Status: store.Status{Epoch: 3, Probe: 20 * time.Second}, At: t0},
			st(3), fleet.Actions{Hold: 20 * time.Second, Decline: true, Extend: t0.Add(20 * time.Second), ExtendGen: 5}},
		{"the lease was refused and the fleet moved on: follow it", with(st(3), func(s *fleet.State) { s.Acquiring = heldA }), view(P, 5, time.Time{}), t0,
			fleet.ProbeReply{Lease: heldA, Status: store.Status{Epoch: 4}, At: t0},
			with(st(4), func(s *fleet.State) { s.EpochAt = 7 }),
			fleet.Actions{Hold: time.Millisecond, Decline: true, Move: &fleet.Move{Gen: 5, State: C}}},
		{"regression (a lease left to run out its minute): the reply of an earlier probe leaves a later one's request alone",
			with(st(5), func(s *fleet.State) { s.Acquiring = lease(9, "b", 5) }), view(P, 9, time.Time{}), t0,
			fleet.ProbeReply{Lease: heldA, Status: store.Status{Epoch: 5}, At: t0},
			with(st(5), func(s *fleet.State) { s.Acquiring = lease(9, "b", 5) }),
			fleet.Actions{Hold: time.Millisecond, Decline: true}},
		{"regression (a lease left to run out its minute): the later one's lease is held with its own token",
			with(st(5), func(s *fleet.State) { s.Acquiring = lease(9, "b", 5) }), view(P, 9, time.Time{}), t0,
			fleet.ProbeReply{Lease: lease(9, "b", 5), Won: true, Status: store.Status{Epoch: 5, Probe: time.Minute}, At: t0},
			with(st(5), func(s *fleet.State) { s.Held = lease(9, "b", 5) }), fleet.Actions{Hold: time.Minute}},
		{"regression: a status read before the lease was asked for does not take the probe for another's", with(st(3), func(s *fleet.State) { s.Acquiring = heldA }), view(P, 5, time.Time{}), t1,
			fleet.Heard{Status: store.Status{Epoch: 3}, At: t0, Seq: 6},
			with(st(3), func(s *fleet.State) { s.Acquiring = heldA }), fleet.Actions{}},
		{"the caller gave up: the slot is given back", with(st(3), func(s *fleet.State) { s.Acquiring = heldA }), view(P, 5, time.Time{}), t0,
			fleet.ProbeReply{Lease: heldA, Canceled: true, At: t0},
			st(3), fleet.Actions{Hold: time.Minute, GiveBack: true}},
		{"the lease could not be asked for: the local probe goes ahead", with(st(3), func(s *fleet.State) { s.Acquiring = heldA }), view(P, 5, time.Time{}), t0,
			fleet.ProbeReply{Lease: heldA, Err: errDown, At: t0},
			with(st(3), func(s *fleet.State) { s.Down, s.DownAt = true, 7 }), fleet.Actions{Hold: time.Minute, Lost: true, FellBack: errDown}},

		// A probe's verdict.
		{"a failed probe opens here; the loop resolves its lease", with(st(3), func(s *fleet.State) { s.Held = heldA }), view(P, 5, t1), t0,
			fleet.ProbeEnded{Gen: 5, Outcome: classify.Failure},
			with(st(3), func(s *fleet.State) { s.Failing = heldA }), fleet.Actions{End: classify.Failure}},
		{"a successful probe is applied in the store first", with(st(3), func(s *fleet.State) { s.Held = heldA }), view(P, 5, t1), t0,
			fleet.ProbeEnded{Gen: 5, Outcome: classify.Success},
			with(st(3), func(s *fleet.State) { s.Deciding = 5 }),
			fleet.Actions{Resolve: &fleet.ResolveCall{Lease: heldA, Outcome: classify.Success}}},
		{"regression (a lease left to run out its minute): a probe whose generation ended gives its lease back",
			with(st(3), func(s *fleet.State) { s.Held = heldA }), view(H, 6, time.Time{}), t0,
			fleet.ProbeEnded{Gen: 5, Outcome: classify.Failure},
			with(st(3), func(s *fleet.State) { s.Deciding = 5 }),
			fleet.Actions{Resolve: &fleet.ResolveCall{Lease: heldA, Outcome: classify.Ignore}}},
		{"a probe with no lease (the store was away) ends here", st(3), view(P, 5, t1), t0,
			fleet.ProbeEnded{Gen: 5, Outcome: classify.Success},
			st(3), fleet.Actions{End: classify.Success}},
		{"the verdict applied: the probe ends, then what was heard meanwhile is followed",
			with(st(3), func(s *fleet.State) {
				s.Deciding = 5
				s.Deferred = &fleet.Heard{Status: store.Status{Epoch: 4}, At: t0}
			}), view(P, 5, t1), t0,
			fleet.VerdictReply{Gen: 5, Outcome: classify.Success, Applied: true, Status: store.Status{Epoch: 4}, At: t0},
			with(st(4), func(s *fleet.State) { s.EpochAt = 7 }),
			fleet.Actions{End: classify.Success, Then: []fleet.Heard{{Status: store.Status{Epoch: 4}, At: t0}}}},
		{"the verdict stale in the store: applied as an ignore, then the store is followed",
			with(st(3), func(s *fleet.State) { s.Deciding = 5 }), view(P, 5, t1), t0,
			fleet.VerdictReply{Gen: 5, Outcome: classify.Success, Status: store.Status{Epoch: 5, Open: time.Minute}, At: t0},
			st(3), fleet.Actions{End: classify.Ignore, Then: []fleet.Heard{{Status: store.Status{Epoch: 5, Open: time.Minute}, At: t0}}}},
		{"what is heard while a verdict is on its way waits for it (the newest epoch's)",
			with(st(3), func(s *fleet.State) {
				s.Deciding = 5
				s.Deferred = &fleet.Heard{Status: store.Status{Epoch: 6}, At: t0}
			}), view(P, 5, t1), t1,
			fleet.Heard{Status: store.Status{Epoch: 4}, At: t1},
			with(st(3), func(s *fleet.State) {
				s.Deciding = 5
				s.Deferred = &fleet.Heard{Status: store.Status{Epoch: 6}, At: t0}
			}), fleet.Actions{}},

		// The loop's steps.
		{"a trip opens the store from the epoch it was counted in, until the opener's period ends",
			with(st(6), func(s *fleet.State) { s.Tripped = fleet.Trip{Gen: 5, Epoch: 4} }), view(O, 5, t1), t0,
			fleet.Applied{Transition: breaker.Transition{From: C, To: O}, Gen: 5, Cause: breaker.CauseTrip, At: t0, Period: time.Second},
			st(6), fleet.Actions{AskLease: true, Open: &fleet.OpenCall{Epoch: 4, Until: t1}}},
		{"a failed probe's lease is resolved with the next period", with(st(3), func(s *fleet.State) { s.Failing = heldA }), view(O, 6, t2), t0,
			fleet.Applied{Transition: breaker.Transition{From: P, To: O}, Gen: 6, Cause: breaker.CauseProbe, At: t0, Period: 2 * time.Second},
			st(3), fleet.Actions{AskLease: true, Resolve: &fleet.ResolveCall{Lease: heldA, Outcome: classify.Failure, Reopen: 2 * time.Second, OnLoop: true}}},
		{"regression (FailOpen declined calls): a verdict the store gave before it went away trips nothing but the fallback's count",
			fleet.State{Policy: consec, Fallback: store.FailOpen, Epoch: 2, Down: true}, view(C, 4, time.Time{}), t0,
			fleet.Recorded{Gen: 4, Failure: true, LocalTrip: true, Verdict: store.Verdict{Failures: 3, Status: store.Status{Epoch: 2}}, At: t0},
			fleet.State{Policy: consec, Fallback: store.FailOpen, Epoch: 2, Down: true, Dirty: true}, fleet.Actions{}},
		{"regression (FailOpen declined calls): a trip decided before the store went away and applied after it is undone",
			fleet.State{Policy: consec, Fallback: store.FailOpen, Epoch: 2, Down: true}, view(O, 5, t1), t0,
			fleet.Applied{Transition: breaker.Transition{From: C, To: O}, Gen: 5, Cause: breaker.CauseTrip, At: t0, Period: time.Second},
			fleet.State{Policy: consec, Fallback: store.FailOpen, Epoch: 2, Down: true}, fleet.Actions{AskLease: true, Move: &fleet.Move{Gen: 5, State: C}}},
		{"a trip applied while failing closed: held open, no timer",
			fleet.State{Policy: consec, Fallback: store.FailClosed, Epoch: 2, Down: true}, view(O, 5, t1), t0,
			fleet.Applied{Transition: breaker.Transition{From: C, To: O}, Gen: 5, Cause: breaker.CauseTrip, At: t0, Period: time.Second},
			fleet.State{Policy: consec, Fallback: store.FailClosed, Epoch: 2, Down: true}, fleet.Actions{AskLease: true, Clear: 5}},
		{"store down: a trip is this process's own", with(st(2), func(s *fleet.State) { s.Down = true }), view(O, 5, t1), t0,
			fleet.Applied{Transition: breaker.Transition{From: C, To: O}, Gen: 5, Cause: breaker.CauseTrip, At: t0, Period: time.Second},
			with(st(2), func(s *fleet.State) { s.Down = true }), fleet.Actions{AskLease: true}},
		{"half-open without having opened here: a lease is decided", st(3), view(H, 2, time.Time{}), t0,
			fleet.Applied{Transition: breaker.Transition{From: O, To: H}, Gen: 2, Cause: breaker.CauseTimer, At: t0},
			st(3), fleet.Actions{AskLease: true}},
		{"Recover's lease", st(3), view(O, 2, t1), t0, fleet.LeaseDecided{Lease: 0},
			with(st(3), func(s *fleet.State) { s.Lease = time.Millisecond }), fleet.Actions{}},
		{"the loop's opening won: the epoch is this process's", st(2), view(O, 5, t1), t0,
			fleet.Decided{Won: true, Status: store.Status{Epoch: 3, Open: time.Second}, At: t0},
			with(st(3), func(s *fleet.State) { s.EpochAt = 7 }), fleet.Actions{}},
		{"another opened first: its period is followed", st(2), view(O, 5, t1), t0,
			fleet.Decided{Status: store.Status{Epoch: 3, Open: 2 * time.Second}, At: t0},
			with(st(3), func(s *fleet.State) { s.EpochAt = 7 }), fleet.Actions{Extend: t2, ExtendGen: 5}},

		// Falling back, and coming back.
		{"regression (FailClosed let calls through): failing closed holds an open breaker with no timer",
			fleet.State{Policy: consec, Fallback: store.FailClosed, Epoch: 3}, view(O, 5, t1), t0, fleet.Failed{Err: errDown},
			fleet.State{Policy: consec, Fallback: store.FailClosed, Epoch: 3, Down: true, DownAt: 7},
			fleet.Actions{Clear: 5, Lost: true, FellBack: errDown}},
		{"failing closed opens a breaker that is not open", fleet.State{Policy: consec, Fallback: store.FailClosed, Epoch: 3}, view(H, 5, time.Time{}), t0, fleet.Failed{Err: errDown},
			fleet.State{Policy: consec, Fallback: store.FailClosed, Epoch: 3, Down: true, DownAt: 7},
			fleet.Actions{Move: &fleet.Move{Gen: 5, State: O}, Lost: true, FellBack: errDown}},
		{"failing open closes the breaker", fleet.State{Policy: consec, Fallback: store.FailOpen, Epoch: 3}, view(O, 5, t1), t0, fleet.Failed{Err: errDown},
			fleet.State{Policy: consec, Fallback: store.FailOpen, Epoch: 3, Down: true, DownAt: 7},
			fleet.Actions{Move: &fleet.Move{Gen: 5, State: C}, Lost: true, FellBack: errDown}},
		{"a forced breaker stays forced", fleet.State{Policy: consec, Fallback: store.FailOpen, Epoch: 3}, fleet.View{State: O, Gen: 5, Forced: true, Asked: 7}, t0, fleet.Failed{Err: errDown},
			fleet.State{Policy: consec, Fallback: store.FailOpen, Epoch: 3, Down: true, DownAt: 7}, fleet.Actions{Lost: true, FellBack: errDown}},
		{"down already: nothing more", with(st(3), func(s *fleet.State) { s.Down = true }), view(C, 5, time.Time{}), t0, fleet.Failed{Err: errDown},
			with(st(3), func(s *fleet.State) { s.Down = true }), fleet.Actions{}},
		{"a read started before the fallback is no news that the store is back", with(st(3), func(s *fleet.State) { s.Down, s.DownAt = true, 7 }), view(C, 5, time.Time{}), t0,
			fleet.Answered{Seq: 7},
			with(st(3), func(s *fleet.State) { s.Down, s.DownAt = true, 7 }), fleet.Actions{}},
		{"back: a closed breaker counts afresh", with(st(3), func(s *fleet.State) { s.Down, s.DownAt = true, 7 }), view(C, 5, time.Time{}), t0,
			fleet.Answered{Seq: 8},
			with(st(3), func(s *fleet.State) { s.DownAt = 7 }), fleet.Actions{Restored: true, Renew: true}},
		{"back: a breaker held open by failing closed closes", fleet.State{Policy: consec, Fallback: store.FailClosed, Down: true, DownAt: 7}, view(O, 5, time.Time{}), t0,
			fleet.Answered{Seq: 8},
			fleet.State{Policy: consec, Fallback: store.FailClosed, DownAt: 7}, fleet.Actions{Restored: true, Move: &fleet.Move{Gen: 5, State: C}}},
		{"back: a forcing made meanwhile forces the fleet", with(st(3), func(s *fleet.State) { s.Down, s.DownAt = true, 7 }), fleet.View{State: O, Gen: 5, Forced: true}, t0,
			fleet.Answered{Seq: 8},
			with(st(3), func(s *fleet.State) { s.DownAt, s.Forcing = 7, true }), fleet.Actions{Restored: true, ForceForFleet: true}},
		{"back: an opening made meanwhile opens the fleet", with(st(2), func(s *fleet.State) { s.Down, s.DownAt = true, 7 }), view(O, 5, t1), t0,
			fleet.Answered{Seq: 8},
			with(st(2), func(s *fleet.State) { s.DownAt = 7 }), fleet.Actions{Restored: true, Open: &fleet.OpenCall{Epoch: 2, Until: t1}}},
		{"a forcing on its way: nothing heard is followed", with(st(3), func(s *fleet.State) { s.Forcing = true }), fleet.View{State: O, Gen: 5, Forced: true}, t0,
			fleet.Heard{Status: store.Status{Epoch: 6}, At: t0, Seq: 9},
			with(st(3), func(s *fleet.State) { s.Forcing = true }), fleet.Actions{}},

		// What is heard.
		{"a change of a newer epoch is followed", st(2), view(C, 4, time.Time{}), t0,
			fleet.Heard{Status: store.Status{Epoch: 3, Open: time.Second}, At: t0},
			with(st(3), func(s *fleet.State) { s.EpochAt = 7 }), fleet.Actions{Move: &fleet.Move{Gen: 4, State: O, Until: t1, Hold: time.Second}}},
		{"a new epoch ends the lease held", with(st(3), func(s *fleet.State) { s.Held = heldA }), view(P, 5, t1), t0,
			fleet.Heard{Status: store.Status{Epoch: 5, Forced: true}, At: t0},
			with(st(5), func(s *fleet.State) { s.EpochAt = 7 }), fleet.Actions{Move: &fleet.Move{Gen: 5, State: O, Forced: true}}},
		{"the store lost its data: a closed breaker takes its numbering", with(st(6), func(s *fleet.State) { s.EpochAt = 4 }), view(C, 9, time.Time{}), t0,
			fleet.Heard{Status: store.Status{Epoch: 0}, At: t0, Seq: 5},
			with(st(0), func(s *fleet.State) { s.EpochAt = 4 }), fleet.Actions{}},
		{"the store lost its data: an opened breaker keeps its epoch", with(st(5), func(s *fleet.State) { s.EpochAt = 4 }), view(O, 9, t1), t0,
			fleet.Heard{Status: store.Status{Epoch: 0}, At: t0, Seq: 5},
			with(st(5), func(s *fleet.State) { s.EpochAt = 4 }), fleet.Actions{}},
		{"a late answer below the epoch is no data loss", with(st(6), func(s *fleet.State) { s.EpochAt = 4 }), view(C, 9, time.Time{}), t0,
			fleet.Heard{Status: store.Status{Epoch: 2}, At: t0, Seq: 4},
			with(st(6), func(s *fleet.State) { s.EpochAt = 4 }), fleet.Actions{}},
		{"a halted breaker follows nothing", st(2), fleet.View{State: C, Gen: 4, Halted: true}, t0,
			fleet.Heard{Status: store.Status{Epoch: 3, Open: time.Second}, At: t0},
			st(2), fleet.Actions{}},

		// Manual control.
		{"ForceOpen goes to the store first", st(2), view(C, 4, time.Time{}), t0, fleet.Manual{Force: true},
			st(2), fleet.Actions{Force: true}},
		{"Reset goes to the store first", st(2), view(O, 4, t1), t0, fleet.Manual{},
			st(2), fleet.Actions{Reset: true}},
		{"store down: a manual action is this process's alone", with(st(2), func(s *fleet.State) { s.Down = true }), view(C, 4, time.Time{}), t0, fleet.Manual{Force: true},
			with(st(2), func(s *fleet.State) { s.Down = true }), fleet.Actions{}},
		{"a manual action's new epoch ends the lease held", with(st(3), func(s *fleet.State) { s.Held = heldA }), view(P, 5, t1), t0,
			fleet.ManualReply{Status: store.Status{Epoch: 4}},
			with(st(4), func(s *fleet.State) { s.EpochAt = 7 }), fleet.Actions{}},
	}
	for _, tc := range tests {
		gotS, gotA := fleet.Step(tc.s, tc.v, tc.now, tc.msg)
		in := fmt.Sprintf("Step(%+v, %+v, t0+%v, %T%+v)", tc.s, tc.v, tc.now.Sub(t0), tc.msg, tc.msg)
		assert.Equal(t, tc.wantS, gotS, "%s: state\n%s", tc.name, in)
		assert.Equal(t, tc.wantA, gotA, "%s: actions\n%s", tc.name, in)
	}
}

// Step is pure: the state it is given is not changed, and the same inputs
// give the same answer.
func TestStepIsPure(t *testing.T) {
	s := with(st(3), func(s *fleet.State) { s.Deciding = 5; s.Held = lease(5, "a", 3) })
	before := s
	v := view(P, 5, t1)
	msg := fleet.Heard{Status: store.Status{Epoch: 4}, At: t0}
	s1, a1 := fleet.Step(s, v, t0, msg)
	s2, a2 := fleet.Step(s, v, t0, msg)
	assert.Equal(t, before, s, "the input state")
	assert.Equal(t, s1, s2)
	assert.Equal(t, a1, a2)
}

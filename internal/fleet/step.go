// Package fleet decides what one process does with a breaker it shares with
// other processes through a store.Store: grant a probe and take its lease,
// apply a probe's verdict (and what to do when the store finds it stale),
// follow a status or a change it heard, fall back when the store cannot be
// reached and come back when it answers, force the fleet after a forcing
// made during an outage, and which outcomes to report.
//
// Every one of those decisions is made by Step, a pure function of the
// state the process keeps of the breaker (State), what its state machine
// shows (View), the time, and one message: what happened (Msg). Step starts
// no goroutine, reads no clock and touches no atomic; it returns the next
// state and the Actions its owner carries out: a change of the machine,
// named by the generation it was decided on, store calls, events. The
// manager owns one State per shared breaker, feeds it every reply and
// every status it hears, and applies the actions; tests and the fuzz model
// drive Step as it is, from fixed instants.
package fleet

import (
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/machine"
	"github.com/fusebox-go/fusebox/internal/sharepolicy"
	"github.com/fusebox-go/fusebox/store"
)

// DefaultLease is a probe's lease when the breaker's Recover has not
// decided one yet (the breaker never opened in this process).
const DefaultLease = 10 * time.Second

// minHold is the shortest timer Step asks for: a lease or a period with
// less than a millisecond left (the stores' unit) is held for one.
const minHold = time.Millisecond

// Lease is a probe lease of this process: the probing generation of its
// machine it was taken for, the token that holds it in the store, the
// store's epoch it belongs to, and how long it was asked for. The zero
// Lease is none.
type Lease struct {
	Gen   uint64
	Token string
	Epoch uint64
	For   time.Duration
	// Asked is when the process asked for the lease, on its clock: the
	// store granted it no earlier, so the lease ends no earlier than
	// Asked+For, and this process counts its end from there.
	Asked time.Time
}

// End is the earliest instant the lease can end, on the process's clock:
// Asked+For.
func (l Lease) End() time.Time { return l.Asked.Add(l.For) }

// Held reports whether l is a lease.
func (l Lease) Held() bool { return l.Gen != 0 }

// Heard is a status of the store as the process heard it: read, or carried
// by a change or a reply, at At. Seq numbers the hub's status read that
// brought it (zero for a change or a reply): only a read can tell that the
// store lost its data.
type Heard struct {
	Status store.Status
	At     time.Time
	Seq    uint64
}

// OpeningWait is how long a process whose failure found the threshold
// already crossed by another's waits to hear of that process's opening
// before it opens the store itself: so that an opening costs one opening
// script, not one per process whose failure came after the crossing, and
// a fleet whose opener died before it opened the store still opens. The
// process is open meanwhile (it tripped); only the store waits. At 100ms,
// 100 managers in 25 processes on 2 cores made 12 to 24 openings per
// opening (the opening reached them later than that); at 300ms, 1.
const OpeningWait = 300 * time.Millisecond

// State is what a process knows and has decided of one shared breaker.
// The zero State (with Policy and Fallback set) is a breaker that has just
// joined, in the first closed epoch. Each concern is one phase (see
// phases.go), moved only by the message that acknowledges it; Check says
// what holds between them.
type State struct {
	// Policy and Fallback are the breaker's configuration.
	Policy   store.Policy
	Fallback store.Fallback

	// Epoch is the store's epoch the machine's state follows; EpochAt is
	// the count of the hub's status reads started when it last rose: a
	// later read that finds the store below it means the store lost its
	// data.
	Epoch   uint64
	EpochAt uint64
	// Lease is how long the next probe may run, as the breaker's Recover
	// decided when it opened; zero until then.
	Lease time.Duration
	// Link is the breaker's link to the store: while it is down,
	// Fallback is in effect.
	Link Link
	// Probe is this process's probe: asking for a lease, holding it,
	// sending its verdict, or failed and waiting for the next period.
	Probe Probe
	// Report is the failure report on its way, and what was folded into
	// the next one meanwhile.
	Report Report
	// Trip is a trip of this process's that waits: for the machine to
	// apply it, for another's opening, for the store to answer, or one
	// made alone.
	Trip OwnTrip
	// Force is a forcing made here that the store has not confirmed.
	Force ForceKind
	// Run is what this process reported into the shared run of
	// consecutive failures (a consecutive policy).
	Run Run
	// Calls and Failures are the window's counts as the store last gave
	// them (a window policy); Processes how many processes reported the
	// failures counted (a quorum).
	Calls, Failures, Processes int64
	// DryRun is manager.Config.DryRun, configuration like Policy: the
	// process reads the store and writes nothing to it that could make
	// another process decline (see dryrun.go).
	DryRun bool
	// QuorumSaid notes that the process told its owner, once, that the
	// quorum refused an opening the threshold reached (QuorumShort,
	// quorum.go): a warning's memo, not a phase of the protocol.
	QuorumSaid bool
}

// View is what the owner of a State sees besides it: the breaker's
// machine, as one snapshot, and the count of status reads the hub of its
// store has started.
type View struct {
	State  breaker.State
	Gen    uint64
	Until  time.Time
	Forced bool
	Halted bool
	Asked  uint64
	// Opener is why the machine says it is open (its OpenError's
	// Cause): the error of this process's own call, or who opened the
	// fleet as the store said (a *breaker.OpenedError); nil if unknown.
	Opener error
}

// Msg is what happened to a shared breaker: one of the types of this
// package below. Each names the caller or the goroutine that sends it.
type Msg interface{ isMsg() }

// Outcome is a call's outcome in the closed generation Gen, which the
// breaker's own counter counted already (LocalTrip: it trips the local
// count). A caller sends it for every failure and for a success that may
// matter to the store (the first after failures, or one that may bring a
// window to its threshold); a healthy success of a healthy breaker sends
// nothing.
type Outcome struct {
	Gen       uint64
	Outcome   classify.Outcome
	LocalTrip bool
}

// Recorded is the store's reply to an outcome a caller reported (a
// ReportCall, whose fields it repeats): the verdict of RecordFailure or
// RecordSuccess, or the call's error, answered at At.
type Recorded struct {
	Gen       uint64
	Failure   bool
	Failures  int64
	LocalTrip bool
	Ends      bool
	Verdict   store.Verdict
	Err       error
	At        time.Time
}

// ProbeWon says a caller won the local probe slot, moving the machine to
// probing generation Gen; Token is the one it will hold the lease with.
type ProbeWon struct {
	Gen   uint64
	Token string
}

// ProbeReply is the store's answer to the lease a caller asked for (the
// AcquireCall, for Lease): won or not, the status it gave, or the call's
// error, answered at At; Canceled says the caller gave up (its context
// ended) first.
type ProbeReply struct {
	Lease    Lease
	Won      bool
	Status   store.Status
	Err      error
	Canceled bool
	At       time.Time
}

// ProbeEnded says the caller of the probe of generation Gen released it
// with outcome Outcome.
type ProbeEnded struct {
	Gen     uint64
	Outcome classify.Outcome
}

// VerdictReply is the store's answer to a probe's verdict a caller sent
// (a ResolveCall), answered at At.
type VerdictReply struct {
	Gen     uint64
	Outcome classify.Outcome
	Applied bool
	Status  store.Status
	Err     error
	At      time.Time
}

// Applied says the loop applied a step of the machine: Transition, into
// generation Gen, at At, with cause Cause; Period is what Recover decided
// for the state it entered, if anything.
type Applied struct {
	breaker.Transition
	Gen    uint64
	Cause  breaker.Cause
	At     time.Time
	Period time.Duration
}

// LeaseDecided is the next probe's lease Recover decided (after an
// AskLease action).
type LeaseDecided struct{ Lease time.Duration }

// Reconfigured says the breaker's policy changed (Reconfigure) to Policy,
// whose layout in the store is the old one's.
type Reconfigured struct{ Policy store.Policy }

// Decided is the store's answer to a call the loop made (an OpenCall, a
// ReopenCall, a ForceCall): applied (Won) or not, and the status it left,
// or the call's error, answered at At.
type Decided struct {
	Won    bool
	Status store.Status
	Err    error
	At     time.Time
}

// Manual says a caller is about to force the breaker open (Force) or
// reset it, for the fleet.
type Manual struct{ Force bool }

// ManualReply is the store's answer to a manual action (ForceOpen, for
// Force, or Reset), or its error.
type ManualReply struct {
	Force  bool
	Status store.Status
	Err    error
}

// Failed says a store call of the breaker, or of its hub (its watch or a
// status read), failed with Err.
type Failed struct{ Err error }

// Awaited says the wait for another process's opening after this
// process's trip of generation Gen is over (an AwaitOpening's deadline).
type Awaited struct{ Gen uint64 }

// Answered says a status read of the hub, the Seq-th, answered: the store
// can be reached.
type Answered struct{ Seq uint64 }

func (Outcome) isMsg()      {}
func (Recorded) isMsg()     {}
func (ProbeWon) isMsg()     {}
func (ProbeReply) isMsg()   {}
func (ProbeEnded) isMsg()   {}
func (VerdictReply) isMsg() {}
func (Applied) isMsg()      {}
func (LeaseDecided) isMsg() {}
func (Reconfigured) isMsg() {}
func (Decided) isMsg()      {}
func (Manual) isMsg()       {}
func (ManualReply) isMsg()  {}
func (Failed) isMsg()       {}
func (Answered) isMsg()     {}
func (Awaited) isMsg()      {}
func (Heard) isMsg()        {}

// Actions are what a Step decided, each kind typed for where it runs:
// Change by whoever stepped (a caller or the loop), under the state's
// lock, on the generation it names; Call by the caller that stepped, whose
// reply is its next message; Loop on the manager's loop (a caller hands
// them over); Then once Change is applied. Nothing a step decides is
// dropped by any of them.
type Actions struct {
	// Change is the one change of the machine the step decided, or nil:
	// a Move, Hold, EndProbe, Renew, Trip or Cause.
	Change Change
	// Call is the store call the step's caller makes, or nil: a
	// ReportCall, AcquireCall, ResolveCall or ManualCall.
	Call Call
	// Probe answers the caller of a ProbeWon or a ProbeReply.
	Probe ProbeAnswer
	// Stale says the caller's outcome was of a closed generation that has
	// ended by the time it was stepped: it changes nothing, and counts as
	// a stale release. Dropped counts the failures folded into a report
	// whose generation this step ended: stale releases too.
	Stale   bool
	Dropped int64
	// Folded says the caller's failure was folded into the failure
	// report on its way (State.Reporting): it waits for that report's
	// verdict, as a caller waits for its own, so that a failing caller
	// never outruns what the store decides.
	Folded bool
	// Loop are the effects the manager's loop carries out, in order.
	Loop []Effect
	// Then are statuses to follow once Change is applied, one Step each.
	Then []Heard
}

// Change is a change of the machine: one of Move, Hold, EndProbe, Renew,
// Trip and Cause, each naming the generation it was decided on; it applies only
// while the machine is in that generation.
type Change interface{ isChange() }

// Move is a change of the machine Step decided on the snapshot of
// generation Gen: to State (Forced), with Until as the end of its timer
// (zero: none) and Hold as what is left of it at the step's now.
type Move struct {
	Gen    uint64
	State  breaker.State
	Until  time.Time
	Forced bool
	Hold   time.Duration

	SlowUntil time.Time // to closed: the end of the fleet's slow start (Mirror.SlowUntil)
	// Reason is who opened the breaker and why, for a move into an
	// opened epoch, as the store said.
	Reason store.Reason
}

// Hold ends the timer of the machine's generation Gen without a
// transition: FailClosed holds the breaker open until the store answers.
type Hold struct{ Gen uint64 }

// EndProbe ends the probe of probing generation Gen with Outcome.
type EndProbe struct {
	Gen     uint64
	Outcome classify.Outcome
}

// Renew gives the closed generation Gen a fresh counter: the store
// counts again. EndSlow ends its slow start too: the fleet's closed epoch
// has none (a Reset).
type Renew struct {
	Gen     uint64
	EndSlow bool
}

// Cause makes the store's Reason why the opened generation Gen is open,
// without a transition: the store says another process opened the fleet
// (its opening stood, this process's own trip did not).
type Cause struct {
	Gen    uint64
	Reason store.Reason
}

// Trip opens the closed generation Gen because of a call with Outcome;
// Alone: in this process alone, the fleet short of its quorum.
type Trip struct {
	Gen     uint64
	Outcome classify.Outcome
	Alone   bool
}

func (Move) isChange()     {}
func (Hold) isChange()     {}
func (EndProbe) isChange() {}
func (Renew) isChange()    {}
func (Trip) isChange()     {}
func (Cause) isChange()    {}

// Call is a store call a caller makes: one of ReportCall, AcquireCall,
// ResolveCall and ManualCall. Its reply is the caller's next message.
type Call interface{ isCall() }

// ReportCall tells the store of an outcome of the closed generation Gen:
// RecordFailure of Failures failures (Failure), or RecordSuccess;
// LocalTrip: one of them tripped the process's own count; Ends: the
// success that ends the run before the failures folded since
// (ReportEnding). Its reply is a Recorded with the same fields.
type ReportCall struct {
	Failure   bool
	Failures  int64
	Gen       uint64
	LocalTrip bool
	Ends      bool
}

// AcquireCall asks the store for a probe lease. Its reply is a
// ProbeReply.
type AcquireCall struct {
	Token string
	Epoch uint64
	Lease time.Duration
	// Asked is the step's instant: the lease's end counts from it
	// (Lease.Asked).
	Asked time.Time
}

// ResolveCall sends a probe's success or ignore to the store. Its reply
// is a VerdictReply.
type ResolveCall struct {
	Lease   Lease
	Outcome classify.Outcome
}

// ManualCall forces the breaker open (Force) or resets it, for the fleet.
// Its reply is a ManualReply.
type ManualCall struct{ Force bool }

func (ReportCall) isCall()  {}
func (AcquireCall) isCall() {}
func (ResolveCall) isCall() {}
func (ManualCall) isCall()  {}

// ProbeAnswer is what becomes of the caller that won the local probe
// (ProbeWon, ProbeReply): Hold is how long its probing state lasts, for
// its timer; Decline: decline it (another process probes, or the fleet
// moved on); GiveBack: end its probe as ignored (it gave up).
type ProbeAnswer struct {
	Hold     time.Duration
	Decline  bool
	GiveBack bool
}

// Effect is what only the manager's loop does: one of OpenCall,
// ReopenCall, ForceCall, GiveBackCall, AskLease, Extend, Lost and
// Restored.
type Effect interface{ isEffect() }

// OpenCall opens the breaker in the store from closed epoch Epoch, until
// Until on the process's clock. Its reply is a Decided.
type OpenCall struct {
	Epoch uint64
	Until time.Time
}

// ReopenCall sends a failed probe's verdict, with the next open period
// Reopen, for the lease it held. Its reply is a Decided.
type ReopenCall struct {
	Lease  Lease
	Reopen time.Duration
}

// ForceCall forces the breaker open in the store, for a forcing made
// while it was unreachable. Its reply is a Decided.
type ForceCall struct{}

// GiveBackCall gives back the lease a caller that gave up may hold: its
// context ended while the store granted the lease (a Resolve of Ignore
// for the lease's token, which changes nothing where the store did not
// grant it). Without it the lease would stand for its whole length with
// no trial under it, and the fleet wait for it (defect 11). Its reply is
// a Heard of the status the store returned, or a Failed.
type GiveBackCall struct{ Lease Lease }

// AskLease asks Recover how long the next probe may run; the answer is a
// LeaseDecided.
type AskLease struct{}

// AwaitOpening asks the loop for an Awaited of generation Gen at At: this
// process waits until then to hear of another's opening (OpeningWait).
type AwaitOpening struct {
	Gen uint64
	At  time.Time
}

// Extend moves the end of the open period of generation Gen, or of its
// probing for another process's lease, to Until.
type Extend struct {
	Gen   uint64
	Until time.Time
}

// Lost says the breaker fell back, after Err: publish the store link's
// change.
type Lost struct{ Err error }

// Restored says the store answers again: publish the store link's
// change.
type Restored struct{}

func (OpenCall) isEffect()     {}
func (ReopenCall) isEffect()   {}
func (ForceCall) isEffect()    {}
func (GiveBackCall) isEffect() {}
func (AskLease) isEffect()     {}
func (AwaitOpening) isEffect() {}
func (Extend) isEffect()       {}
func (Lost) isEffect()         {}
func (Restored) isEffect()     {}

// loop adds effect e for the loop.
func (a *Actions) loop(e Effect) { a.Loop = append(a.Loop, e) }

// Step is every decision of a shared breaker: given what the process
// knows (s), what its machine shows (v), the time and what happened (m),
// it returns the next state and what to do. It is pure.
func Step(s State, v View, now time.Time, m Msg) (State, Actions) {
	var a Actions
	switch m := m.(type) {
	case Outcome:
		s.outcome(v, m, &a)
	case Recorded:
		s.recorded(v, now, m, &a)
	case ProbeWon:
		s.probeWon(now, m, &a)
	case ProbeReply:
		s.probeReply(v, now, m, &a)
	case ProbeEnded:
		s.probeEnded(v, m, &a)
	case VerdictReply:
		s.verdictReply(v, m, &a)
	case Applied:
		s.applied(m, &a)
	case LeaseDecided:
		s.Lease = max(m.Lease, minHold)
	case Reconfigured:
		s.Policy, s.QuorumSaid = m.Policy, false
	case Decided:
		s.decided(v, now, m, &a)
	case Manual:
		// The action goes to the store even while it seems unreachable
		// (a breaker whose own data is bad falls back alone, and a
		// Reset is what repairs it). A forcing is this process's alone
		// until the store confirms it (ManualReply): if the store does
		// not, the fleet is forced once it answers. A Reset supersedes
		// a forcing not confirmed yet.
		s.Force = ForceNone
		if m.Force {
			s.Force = ForceAsked
		}
		if s.Link.Down && !m.Force {
			s.holdReset(v, &a)
		}
		a.Call = ManualCall(m)
	case ManualReply:
		if m.Err != nil {
			// The action is this process's alone until the store
			// answers: a forcing then forces the fleet.
			if m.Force && s.Force == ForceAsked {
				s.Force = ForcePending
			}
			s.fallBack(v, m.Err, &a)
			if !m.Force {
				s.holdReset(v, &a)
			}
			break
		}
		if m.Force && s.Force == ForceAsked {
			s.Force = ForceNone
		}
		if s.Probe.Kind == ProbeHeld {
			s.Probe = Probe{} // the new epoch ends the lease
		}
		s.raise(v, m.Status.Epoch)
	case Failed:
		s.fallBack(v, m.Err, &a)
	case Answered:
		s.answered(v, now, m, &a)
	case Awaited:
		s.awaited(m, &a)
	case Heard:
		s.hear(v, now, m, &a)
	case DryRunSet:
		s.DryRun = m.On
	case HalfOpenAsked:
		s.halfOpenAsked(v, &a)
	case HalfOpenReply:
		s.halfOpenReply(v, now, m, &a)
	}
	return s, a
}

// Quiet reports whether an outcome in the closed state needs no step:
// Step would decide nothing for it. o is the outcome, localTrip whether
// it trips the process's own count, and calls the window's calls the
// store and this process know of (the store's last count and the
// successes not reported yet; zero for a consecutive policy). It reads
// only what the owner of the state publishes for lock-free readers
// (Hints), so that a healthy success of a healthy breaker takes no lock.
func (h Hints) Quiet(o classify.Outcome, localTrip bool, calls int64) bool {
	switch {
	case o == classify.Ignore:
		return true // an ignored call trips no count
	case h.Down || h.DryRun:
		return !localTrip
	case o == classify.Failure:
		return false
	case h.Window:
		// A window with no failure in it cannot trip: a success is
		// stepped only when it may bring the window to its threshold,
		// by this process's count or the fleet's.
		return !localTrip && !(h.Failures > 0 && sharepolicy.Reached(h.Policy, store.Verdict{Calls: calls, Failures: h.Failures}))
	}
	return !h.Dirty
}

// Hints are what Quiet reads of a State, published by its owner after
// each step for lock-free readers.
type Hints struct {
	Down, Dirty, DryRun bool
	Window              bool
	// Calls and Failures are the window's counts as the store last gave
	// them; Processes how many processes reported its failures.
	Calls, Failures, Processes int64
	Policy                     store.Policy
}

// Hints returns what Quiet needs of s, and Stats shows.
func (s State) Hints() Hints {
	// A success is stepped while it has a run to end: one this process
	// reported into, or one its failure report on the way adds to.
	dirty := s.Run.Kind == RunReported || s.Report.Kind != ReportIdle && s.Policy.Rate <= 0
	return Hints{Down: s.Link.Down, Dirty: dirty, DryRun: s.DryRun, Window: s.Policy.Rate > 0,
		Calls: s.Calls, Failures: s.Failures, Processes: s.Processes, Policy: s.Policy}
}

// outcome decides what a caller reports of an outcome in the closed state.
func (s *State) outcome(v View, m Outcome, a *Actions) {
	switch {
	case v.Gen != m.Gen || v.State != breaker.Closed:
		// The closed generation it was counted in has ended (a trip
		// decided meanwhile): the outcome is stale, and the store hears
		// nothing of it.
		a.Stale = true
	case s.Link.Down:
		// Only the local fallback counts, and trips.
		s.localTrip(m.Gen, m.Outcome, m.LocalTrip, a)
	case s.DryRun:
		s.dryOutcome(m, a)
	case m.Outcome == classify.Failure && s.Report.Kind != ReportIdle:
		r := &s.Report
		if r.Gen != m.Gen {
			// Failures folded in an earlier closed generation are
			// stale: the next report is of this one.
			a.Dropped += r.Folded
			r.Folded, r.Gen, r.FoldedTrip = 0, m.Gen, false
			if r.Kind == ReportEnded {
				r.Kind = ReportInFlight // the success ended a run of that generation
			}
		}
		r.Folded++
		r.FoldedTrip = r.FoldedTrip || m.LocalTrip
		a.Folded = true
	case m.Outcome == classify.Failure:
		s.Report = Report{Kind: ReportInFlight}
		a.Call = ReportCall{Failure: true, Failures: 1, Gen: m.Gen, LocalTrip: m.LocalTrip}
	case m.Outcome == classify.Success && s.Report.Kind != ReportIdle && s.Policy.Rate <= 0:
		s.successDuringReport(m)
	case m.Outcome != classify.Success:
	case s.Policy.Rate > 0:
		a.Call = ReportCall{Gen: m.Gen, LocalTrip: m.LocalTrip}
	case s.Run.Kind == RunReported:
		// The first success after this process's failures ends the
		// shared run; later ones have nothing to end.
		s.Run = Run{}
		a.Call = ReportCall{Gen: m.Gen, LocalTrip: m.LocalTrip}
	}
}

// successDuringReport is a success of the closed generation of m while
// this process's failure report is on its way (or the success that ends
// the run before the failures folded since): under a consecutive policy
// it ends the run that report adds to, so the store must hear of it after
// the report and before the failures released after it (ReportEnded),
// or the run would outlive it (defect 13: failure, success, failure
// opened a shared Consecutive{2} and not the local one). The failures
// folded before it are in the run it ends: the store hears nothing of
// them, as a local count keeps nothing of them. Unless they tripped the
// process's own count: that trip stands, as a local breaker's would have
// come before this success.
func (s *State) successDuringReport(m Outcome) {
	r := &s.Report
	if r.Gen == m.Gen && r.FoldedTrip {
		return
	}
	k := r.Kind
	if k == ReportInFlight {
		k = ReportEnded
	}
	*r = Report{Kind: k, Gen: m.Gen}
}

// foldedTrip reports whether a failure folded while a report of the
// closed generation gen was on its way tripped the process's own count.
func (s *State) foldedTrip(gen uint64) bool {
	return s.Report.FoldedTrip && s.Report.Gen == gen
}

// unfold ends a failure report: the failures folded meanwhile go with
// the next report of the caller that made this one, if they are still of
// the closed generation gen and nothing else was decided; otherwise they
// are dropped (the machine moved on, or the store is unreachable: the
// local count has them).
//
// A report ended by a success (ReportEnded) sends the success first, and
// keeps the failures folded since for the success's reply (ReportEnding).
func (s *State) unfold(gen uint64, a *Actions) {
	r := s.Report
	s.Report = Report{}
	if r.Folded == 0 && r.Kind != ReportEnded {
		return
	}
	if r.Gen != gen || a.Change != nil || s.Trip.Kind == TripDecided && s.Trip.Gen == gen+1 {
		a.Dropped += r.Folded // their generation has ended
		return
	}
	if a.Call != nil || s.Link.Down {
		return // the local count has them
	}
	if r.Kind == ReportEnded {
		s.Run = Run{} // the success ends it
		s.Report = Report{Kind: ReportEnding, Gen: r.Gen, Folded: r.Folded, FoldedTrip: r.FoldedTrip}
		a.Call = ReportCall{Gen: gen, Ends: true}
		return
	}
	s.Report = Report{Kind: ReportInFlight}
	a.Call = ReportCall{Failure: true, Failures: r.Folded, Gen: gen, LocalTrip: r.FoldedTrip}
}

// localTrip trips the closed generation gen on the process's own count
// while the store is unreachable, if the fallback is the local machine.
func (s *State) localTrip(gen uint64, o classify.Outcome, trips bool, a *Actions) {
	if s.Fallback == store.FallbackLocal && trips && a.Change == nil {
		// Under a quorum the process's own count opens it alone: the
		// store, once it answers, hears nothing of it.
		a.Change = Trip{Gen: gen, Outcome: o, Alone: s.Policy.Quorum > 1 || s.DryRun}
	}
}

// recorded takes the store's verdict on a reported outcome.
func (s *State) recorded(v View, now time.Time, m Recorded, a *Actions) {
	o := classify.Success
	if m.Failure {
		o = classify.Failure
	}
	if m.Err != nil {
		if !m.Failure && s.Policy.Rate <= 0 {
			s.Run.Kind = RunReported // the run was not ended: end it with the next success
		}
		trips := m.LocalTrip || m.Failure && s.foldedTrip(m.Gen)
		s.fallBack(v, m.Err, a)
		if m.Failure || m.Ends {
			s.unfold(m.Gen, a) // the store is unreachable: dropped
		}
		s.localTrip(m.Gen, o, trips, a)
		return
	}
	if m.Failure || m.Ends {
		defer s.unfold(m.Gen, a)
	}
	if m.Failure && s.Policy.Rate <= 0 {
		s.Run = Run{Kind: RunReported, In: max(s.Run.In, m.Verdict.Epoch)}
	}
	if s.Policy.Rate > 0 {
		s.Calls, s.Failures = m.Verdict.Calls, m.Verdict.Failures
	} else if !m.Failure {
		s.Processes = 0
		return // a consecutive success's reply says nothing more
	}
	if s.Link.Down {
		// The store answered this one, and has failed another since:
		// the fallback decides, as for an outcome while it is away.
		s.localTrip(m.Gen, o, m.LocalTrip || m.Failure && s.foldedTrip(m.Gen), a)
		return
	}
	if s.Policy.Quorum > 1 {
		s.Processes = m.Verdict.Processes
		s.quorumShort(m.Verdict, a)
	}
	switch {
	case m.Verdict.Opened():
		// The fleet is open already: follow it.
		s.hear(v, now, Heard{Status: m.Verdict.Status, At: m.At}, a)
	case s.Policy.Trips(m.Verdict):
		// The trip belongs to the closed epoch the store counted in.
		s.raise(v, m.Verdict.Epoch)
		if v.State == breaker.Closed && v.Gen == m.Gen && s.Trip.Kind == TripNone {
			s.Trip = OwnTrip{Kind: TripDecided, Gen: m.Gen + 1, Epoch: m.Verdict.Epoch, Await: s.crossedBefore(m)}
		}
		a.Change = Trip{Gen: m.Gen, Outcome: o}
	case s.Policy.Quorum > 1 && m.LocalTrip:
		// This process's own outcomes reach the threshold, the fleet's
		// are short of the quorum: it protects itself, alone, and
		// publishes nothing.
		a.Change = Trip{Gen: m.Gen, Outcome: o, Alone: true}
	}
}

// crossedBefore reports whether the failures a reply counted had crossed
// the threshold before this report's were added (a consecutive policy
// without a quorum, whose run only grows until it ends): another
// process's failure crossed it, and that process opens the fleet. Window
// policies and quorums report false: each process that sees its counts
// trip opens the store, as the first opener's period stands.
func (s *State) crossedBefore(m Recorded) bool {
	p := s.Policy
	if !m.Failure || p.Rate > 0 || p.Quorum > 1 {
		return false
	}
	return sharepolicy.Reached(p, store.Verdict{Failures: m.Verdict.Failures - m.Failures})
}

// awaited ends the wait for another process's opening: if none was heard,
// this process opens the store itself from the closed epoch the trip was
// counted in, for what is left of its own period.
func (s *State) awaited(m Awaited, a *Actions) {
	w := s.Trip
	if w.Kind != TripAwaiting || w.Gen != m.Gen {
		return
	}
	s.Trip = OwnTrip{}
	// None heard (hear ends the wait on one): the store opens the
	// trip's closed epoch if it is still in it, and refuses if the fleet
	// moved on. This process's own epoch says nothing of it: after the
	// store lost its data, the trip's epoch (the store's numbering) is
	// below the one this process kept.
	a.loop(OpenCall{Epoch: w.Epoch, Until: w.Until})
}

// holdReset is a Reset while the store is unreachable: failing closed,
// the breaker is held open with no timer, unforced, instead of closing,
// and no call is let through until the store answers (the Reset is this
// process's alone, and it falls back). Its caller then leaves the machine
// as the change left it.
func (s *State) holdReset(v View, a *Actions) {
	switch {
	case !s.failsClosed() || v.Halted:
	case v.State == breaker.Open && !v.Forced:
		a.Change = Hold{Gen: v.Gen}
	default:
		a.Change = Move{Gen: v.Gen, State: breaker.Open}
	}
}

// failsClosed reports whether the breaker is on a FailClosed fallback.
func (s *State) failsClosed() bool { return s.Link.Down && s.Fallback == store.FailClosed }

// lease is how long the next probe's lease is.
func (s *State) lease() time.Duration {
	if s.Lease > 0 {
		return s.Lease
	}
	return DefaultLease
}

// probeWon decides what a caller that won the local probe does: take the
// store's lease, or, while the store is unreachable, probe on its own.
func (s *State) probeWon(now time.Time, m ProbeWon, a *Actions) {
	if s.failsClosed() {
		// Nothing but the store's answer lets a call through.
		a.Probe.Decline = true
		a.Change = Move{Gen: m.Gen, State: breaker.Open}
		return
	}
	if s.Link.Down || s.Trip.Kind == TripAlone || s.DryRun {
		a.Probe.Hold = max(s.Lease, minHold)
		return
	}
	if w := s.Trip; w.Kind == TripAwaiting && s.Epoch <= w.Epoch {
		// The period this process's trip set ended before it heard of
		// the opening it awaits (its opener died, or its reply was
		// lost): the store is still in the closed epoch, where no
		// lease is granted. It opens the store itself now, with its
		// period over, and the next caller asks for the lease in the
		// opened epoch.
		s.Trip = OwnTrip{}
		a.loop(OpenCall{Epoch: w.Epoch, Until: now})
		a.Probe = ProbeAnswer{Hold: minHold, Decline: true}
		return
	}
	// A probe of an earlier generation still in the store's hands here
	// is over: its time ran out, and its lease with it (the lease's
	// reply brings a newer status than any deferred).
	l := Lease{Gen: m.Gen, Token: m.Token, Epoch: s.Epoch, For: s.lease(), Asked: now}
	s.Probe = Probe{Kind: ProbeAcquiring, Lease: l}
	a.Call = AcquireCall{Token: m.Token, Epoch: s.Epoch, Lease: l.For, Asked: now}
}

// probeReply takes the store's answer to a lease.
func (s *State) probeReply(v View, now time.Time, m ProbeReply, a *Actions) {
	l := m.Lease
	current := s.Probe.of(ProbeAcquiring, l.Gen)
	if current {
		s.Probe = Probe{}
	}
	switch {
	case m.Canceled:
		// The caller gave up: give the probe slot back, and the lease
		// the store may have granted meanwhile.
		a.Probe = ProbeAnswer{Hold: l.For, GiveBack: true}
		a.loop(GiveBackCall{Lease: l})
	case m.Err != nil:
		// The local probe goes ahead, for the lease it asked for,
		// unless the breaker fails closed or that time is over.
		s.fallBack(v, m.Err, a)
		a.Probe = ProbeAnswer{Hold: l.For, Decline: s.failsClosed() || !m.At.Before(l.End())}
	case m.Won && (!current || !m.At.Before(l.End())):
		// The grant came back after the lease it grants could have
		// ended (a congested link, a stalled process), or after its
		// probe's generation ended here: another process may hold the
		// next lease already. No trial: the lease lapses in the store
		// at its time, and the probing state here ends with it (its
		// timer, counted from the asking, is due).
		a.Probe = ProbeAnswer{Hold: l.For, Decline: true}
	case m.Won:
		s.Probe = Probe{Kind: ProbeHeld, Lease: l}
		a.Probe.Hold = l.For
	default:
		// Another process probes, the store's open period is not over,
		// or the fleet moved to another epoch: decline, and follow what
		// the store says (another's lease until its end and this
		// process's lag, as Follow has it).
		hold := minHold
		if m.Status.Probe > 0 {
			hold = max(m.Status.Probe+Lag(s.Policy.Reporter), minHold)
		}
		a.Probe = ProbeAnswer{Hold: hold, Decline: true}
		s.hear(v, now, Heard{Status: m.Status, At: m.At}, a)
	}
}

// probeEnded decides what becomes of a probe's verdict.
func (s *State) probeEnded(v View, m ProbeEnded, a *Actions) {
	if !s.Probe.of(ProbeHeld, m.Gen) {
		// No lease of this probe's: the store was unreachable.
		a.Change = EndProbe(m)
		return
	}
	l := s.Probe.Lease
	s.Probe = Probe{}
	current := v.Gen == m.Gen && v.State == breaker.Probing && !v.Halted
	switch {
	case s.Link.Down:
		a.Change = EndProbe(m)
	case !current:
		// The probe's generation ended here (its time ran out) while the
		// lease may still stand: give the lease back with what the
		// probe learnt, a failure as an ignore (the open period it
		// would set was never decided), and follow the store. The
		// release is stale here (EndProbe, once the store answered).
		o := m.Outcome
		if o == classify.Failure {
			o = classify.Ignore
		}
		s.Probe = Probe{Kind: ProbeDeciding, Lease: l}
		a.Call = ResolveCall{Lease: l, Outcome: o}
	case m.Outcome == classify.Failure:
		// The breaker opens here at once; the loop resolves the lease
		// with the period Recover decides, which the lease protects
		// until then.
		s.Probe = Probe{Kind: ProbeFailing, Lease: l}
		a.Change = EndProbe{Gen: m.Gen, Outcome: classify.Failure}
	default:
		// A success or an ignore is applied in the store first, so that
		// no call this process admits afterwards counts against the run
		// it clears, nor finds the lease still held.
		s.Probe = Probe{Kind: ProbeDeciding, Lease: l}
		a.Call = ResolveCall{Lease: l, Outcome: m.Outcome}
	}
}

// verdictReply takes the store's answer to a verdict a caller sent, and
// follows what was heard while it was on its way.
func (s *State) verdictReply(v View, m VerdictReply, a *Actions) {
	var deferred *Heard
	if s.Probe.of(ProbeDeciding, m.Gen) {
		deferred = s.Probe.Deferred
		s.Probe = Probe{}
	}
	switch {
	case m.Err != nil:
		// The fallback's change of the machine, if it has one, ends
		// the probe; otherwise the probe ends here as it went.
		s.fallBack(v, m.Err, a)
		if a.Change == nil {
			a.Change = EndProbe{Gen: m.Gen, Outcome: m.Outcome}
		}
	case m.Applied:
		s.raise(v, m.Status.Epoch)
		a.Change = EndProbe{Gen: m.Gen, Outcome: m.Outcome}
	default:
		// Stale in the store (its lease or its epoch is over): applied
		// here as an ignore, and the breaker follows the store.
		a.Change = EndProbe{Gen: m.Gen, Outcome: classify.Ignore}
		a.Then = append(a.Then, Heard{Status: m.Status, At: m.At})
	}
	if deferred != nil {
		a.Then = append(a.Then, *deferred)
	}
}

// applied does what a step the loop applied needs of the store.
func (s *State) applied(m Applied, a *Actions) {
	// The next probe's lease is decided as the breaker opens, or as it
	// turns half-open without having opened here (it joined, or heard
	// of, an opening whose period is over).
	if m.To == breaker.Open && m.Cause != breaker.CauseForceOpen || m.To == breaker.HalfOpen && s.Lease == 0 {
		a.loop(AskLease{})
	}
	var trip OwnTrip
	if s.Trip.Kind == TripDecided && s.Trip.Gen == m.Gen {
		trip, s.Trip = s.Trip, OwnTrip{}
	}
	switch {
	case m.Cause == breaker.CauseAlone:
		s.Trip = OwnTrip{Kind: TripAlone, Gen: m.Gen}
	case m.To == breaker.Closed:
		// A closing ends every trip of the epoch it closes: one made
		// alone, one awaiting another's opening, one to tell the fleet.
		s.Trip = OwnTrip{}
	}
	epoch := s.Epoch
	if trip.Kind == TripDecided {
		epoch = trip.Epoch
	}
	opened := m.Transition == breaker.Transition{From: breaker.Closed, To: breaker.Open} && m.Cause == breaker.CauseTrip
	until := machine.After(m.At, m.Period)
	if s.Link.Down {
		// A step decided before the store went away and applied after
		// it: the fallback has the last word. Failing closed, the
		// breaker stays open with no timer, whatever step ran: no local
		// cycle of periods and probes lets a call through.
		forced := m.Cause == breaker.CauseForceOpen
		switch {
		case s.Fallback == store.FailOpen && m.Transition == (breaker.Transition{From: breaker.Closed, To: breaker.Open}) && !forced:
			a.Change = Move{Gen: m.Gen, State: breaker.Closed}
		case s.Fallback == store.FailClosed && m.To == breaker.Open && !forced:
			a.Change = Hold{Gen: m.Gen}
		case s.Fallback == store.FailClosed && (m.To == breaker.HalfOpen || m.To == breaker.Probing):
			a.Change = Move{Gen: m.Gen, State: breaker.Open}
		case opened && s.Fallback == store.FallbackLocal && epoch%2 == 0 && !s.DryRun:
			// A trip of the fleet's count: the fleet hears of it
			// when the store answers (answered). (In an opened
			// epoch, one this process left on its own fallback,
			// the fleet is open already, or moved on.)
			s.Trip = OwnTrip{Kind: TripOutage, Gen: m.Gen, Epoch: epoch, Until: until}
		}
		return
	}
	switch {
	case opened && trip.Await:
		// Another process crossed the threshold: its opening is on
		// its way to every process.
		deadline := m.At.Add(OpeningWait)
		s.Trip = OwnTrip{Kind: TripAwaiting, Gen: m.Gen, Epoch: epoch, Until: until, Deadline: deadline}
		a.loop(AwaitOpening{Gen: m.Gen, At: deadline})
	case opened:
		a.loop(OpenCall{Epoch: epoch, Until: until})
	case m.Transition == breaker.Transition{From: breaker.Probing, To: breaker.Open}:
		// A failed probe: the lease keeps the fleet from probing until
		// the new period is in the store.
		if p := s.Probe; p.Kind == ProbeFailing && p.Lease.Gen+1 == m.Gen {
			// Until its Decided the store holds the lease for this
			// process: hearing it back moves nothing (echoed).
			s.Probe = Probe{Kind: ProbeReopening, Lease: p.Lease}
			a.loop(ReopenCall{Lease: p.Lease, Reopen: m.Period})
		}
	}
}

// decided takes the store's answer to a call the loop made.
func (s *State) decided(v View, now time.Time, m Decided, a *Actions) {
	forcing := s.Force == ForceSending
	if forcing {
		// The fleet's forcing is in the store, or the store did not
		// answer: then it stays this process's, and the next return
		// forces the fleet.
		s.Force = ForceNone
	}
	if s.Probe.Kind == ProbeReopening {
		s.Probe = Probe{} // the failed probe's verdict is in, or lost
	}
	switch {
	case m.Err != nil:
		if forcing {
			s.Force = ForcePending
		}
		s.fallBack(v, m.Err, a)
	case s.Link.Down:
	case m.Won:
		// This process's decision stands: its state is the fleet's, in
		// the new epoch.
		s.raise(v, m.Status.Epoch)
	default:
		// Another process opened first, or the verdict was stale:
		// follow what stands.
		s.hear(v, now, Heard{Status: m.Status, At: m.At}, a)
	}
}

// fallBack puts the breaker on its fallback after err.
func (s *State) fallBack(v View, err error, a *Actions) {
	var lost bool
	if s.Link, lost = s.Link.Fail(err, v.Asked); !lost {
		return
	}
	a.loop(Lost{Err: err})
	if s.Force == ForceSending {
		// The forcing's answer may never come: it is this process's
		// again, and the next return forces the fleet (forcing a
		// forced breaker changes nothing).
		s.Force = ForcePending
	}
	if w := s.Trip; w.Kind == TripAwaiting {
		// The opening it awaited may never be heard of now: the fleet
		// hears of this process's trip when the store answers.
		s.Trip = OwnTrip{Kind: TripOutage, Gen: w.Gen, Epoch: w.Epoch, Until: w.Until}
	}
	if v.Forced || v.Halted {
		return
	}
	switch s.Fallback {
	case store.FailOpen:
		if v.State != breaker.Closed {
			a.Change = Move{Gen: v.Gen, State: breaker.Closed}
		}
	case store.FailClosed:
		// Open with no timer, whatever timer ran: nothing but the
		// store's answer (or a Reset) lets a call through.
		switch {
		case v.State != breaker.Open:
			a.Change = Move{Gen: v.Gen, State: breaker.Open}
		case !v.Until.IsZero():
			a.Change = Hold{Gen: v.Gen}
		}
	}
}

// answered ends the fallback once a status read started after it answers,
// and tells the fleet what this process decided meanwhile.
func (s *State) answered(v View, now time.Time, m Answered, a *Actions) {
	var back bool
	if s.Link, back = s.Link.Answer(m.Seq); !back {
		return
	}
	a.loop(Restored{})
	switch {
	case s.Fallback == store.FailClosed && v.State == breaker.Open && v.Until.IsZero() && !v.Forced:
		a.Change = Move{Gen: v.Gen, State: breaker.Closed}
	case v.Forced && (s.Force == ForcePending || s.Force == ForceAsked):
		// Forced open by hand during the outage: force the fleet. The
		// forcing is this process's until the store confirms it
		// (decided): a ForceCall that fails is made again at the next
		// return.
		s.Force = ForceSending
		a.loop(ForceCall{})
	case v.Forced:
		// Forced by following the fleet: the store says whether it
		// still is (a Reset made meanwhile lifts it here too).
	case s.Trip.Kind == TripOutage && !s.DryRun && s.Trip.Gen == v.Gen && v.State == breaker.Open && v.Until.After(now):
		// The fleet's count tripped here during the outage: tell the
		// fleet. A breaker open because it follows the fleet, or open
		// alone (a quorum), sends nothing.
		a.loop(OpenCall{Epoch: s.Trip.Epoch, Until: v.Until})
	}
	if s.Trip.Kind == TripOutage {
		s.Trip = OwnTrip{} // told, or over: the machine moved on
	}
	if a.Change == nil && v.State == breaker.Closed {
		// The counter counted the outage's calls; the store counts
		// again.
		a.Change = Renew{Gen: v.Gen}
	}
}

// hear follows a status the process heard, as Follow says, unless it must
// not: the store is unreachable, a forcing is on its way, or a caller is
// applying its probe's verdict (the status waits for it).
func (s *State) hear(v View, now time.Time, h Heard, a *Actions) {
	switch {
	case s.Link.Down || s.Force == ForceSending || v.Halted:
		return
	case s.Probe.Kind == ProbeDeciding:
		if d := s.Probe.Deferred; d == nil || h.Status.Epoch >= d.Status.Epoch {
			s.Probe.Deferred = &h
		}
		return
	}
	if w := s.Trip; w.Kind == TripAwaiting && h.Status.Opened() && h.Status.Epoch > w.Epoch {
		// The opening it awaits, or a later one, in the store's
		// numbering (after a data loss, below this process's epoch):
		// the wait is over.
		s.Trip = OwnTrip{}
	}
	if s.Trip.Kind == TripAlone && h.Status.Epoch <= s.Epoch {
		// Opened alone, in the fleet's closed epoch: the fleet's state
		// is not this breaker's until it closes or the fleet moves on.
		return
	}
	lost := h.Seq > 0 && h.Status.Epoch < s.Epoch && h.Seq > s.EpochAt &&
		(v.State == breaker.Closed || v.Forced || h.Status.Forced)
	if lost {
		// Asked for after this process knew of its epoch, and below
		// it: the store lost its data. For a closed breaker the store's
		// numbering is the fleet's from now on. So it is for a forced
		// one, which has no deadline to keep and would follow nothing
		// the fleet does until the store's epochs passed it (a Reset),
		// and for any breaker when the store says forced: a forcing
		// made since is the fleet's. Another opened one keeps its
		// epoch, and its deadlines: a probe may be in flight, and the
		// emptied store is no closed breaker (the next probe raises the
		// store's epoch to its own).
		s.Epoch = h.Status.Epoch
	}
	// This process holds the lease while its probe is the machine's
	// current state, and while a caller asks for it.
	holder := v.State == breaker.Probing && (s.Probe.of(ProbeHeld, v.Gen) || s.Probe.of(ProbeAcquiring, v.Gen)) || s.echoed(h)
	self := s.Policy.Reporter
	cur := Mirror{State: v.State, Epoch: s.Epoch, Until: v.Until, Forced: v.Forced, Holder: holder, Self: self, Lag: Lag(self)}
	next, changed := Follow(cur, h.Status, h.At, now)
	if lost && v.Forced && !h.Status.Forced {
		// The fleet's forcing was lost with the data, or lifted since
		// (one made here while the store was away is on its way, and
		// nothing is heard until it is in the store): what the store
		// says stands.
		next, changed = moved(cur, described(cur, h.Status, h.At, now), true)
	}
	if !changed {
		return
	}
	if next.Epoch > cur.Epoch {
		s.raise(v, next.Epoch)
		if s.Probe.Kind == ProbeHeld {
			s.Probe = Probe{} // a new epoch ends the lease this process held
		}
	}
	if next.State == v.State && next.Forced == v.Forced {
		if !next.Until.IsZero() && !next.Until.Equal(v.Until) {
			a.loop(Extend{Gen: v.Gen, Until: next.Until})
		}
		if r := h.Status.Reason; a.Change == nil && s.namesOther(v, h.Status) {
			// Opened in the store's epoch by another process, whose
			// opening stood: the fleet's opener is this breaker's.
			a.Change = Cause{Gen: v.Gen, Reason: r}
		}
		if v.State == breaker.Closed && next.Epoch > cur.Epoch && a.Change == nil {
			// A closed epoch this closed breaker did not close in (a
			// Reset elsewhere): the fleet's counts went, and its own
			// count starts again too, as a Reset here would have it;
			// so does its slow start, unless the store's epoch has one.
			a.Change = Renew{Gen: v.Gen, EndSlow: h.Status.SlowStart == 0}
		}
		return
	}
	if a.Change != nil {
		// A change decided earlier in this step (a verdict's end of
		// the probe) goes first; the status is followed after it.
		a.Then = append(a.Then, h)
		return
	}
	var hold time.Duration
	if !next.Until.IsZero() {
		hold = next.Until.Sub(now)
	}
	mv := Move{Gen: v.Gen, State: next.State, Until: next.Until, Forced: next.Forced, Hold: hold, SlowUntil: next.SlowUntil}
	if h.Status.Opened() {
		mv.Reason = h.Status.Reason
	}
	a.Change = mv
}

// namesOther reports whether status st, of the epoch the state follows,
// names an opener other than this process, and other than the one the
// machine names: the store's word on who opened the fleet is the one
// every process gives.
func (s *State) namesOther(v View, st store.Status) bool {
	r := st.Reason
	if !st.Opened() || st.Forced || v.Forced || v.State == breaker.Closed || st.Epoch != s.Epoch || r == (store.Reason{}) || r.By == s.Policy.Reporter {
		return false
	}
	o, ok := v.Opener.(*breaker.OpenedError)
	return !ok || o.By != r.By || o.Text != r.Why
}

// raise moves the epoch up to e, noting how many status reads had
// started by then.
func (s *State) raise(v View, e uint64) {
	if e > s.Epoch {
		// The fleet moved on: a breaker open alone in the epoch it
		// left follows it from now on.
		s.Epoch, s.EpochAt = e, v.Asked
		if s.Trip.Kind == TripAlone {
			s.Trip = OwnTrip{}
		}
	}
	if s.Run.Kind == RunReported && e%2 == 0 && e > s.Run.In {
		// A closing after the failures this process reported deleted
		// their run: no success of its has one to end.
		s.Run = Run{}
	}
}

// Apply applies change c, which a step decided on snapshot s, to the
// breaker's machine m at now; callErr is the error of the call a Trip or
// an EndProbe applies. It returns the machine's step, if it made one;
// moved reports that the machine had moved on from s before a Move or a
// Hold applied, so that the step is to be decided again. stale reports an
// EndProbe of a probe that was no longer current.
func Apply(m *machine.Machine, c Change, s *machine.Snapshot, callErr error, now time.Time) (step machine.Step, made, moved, stale bool) {
	switch c := c.(type) {
	case Move:
		step, ok := m.Mirror(c.Gen, c.State, c.Until, c.Forced, c.SlowUntil, reasonErr(c.Reason), now)
		return step, ok, !ok && m.Snapshot().Gen != s.Gen, false
	case Hold:
		return machine.Step{}, false, !m.Hold(c.Gen) && m.Snapshot().Gen != s.Gen, false
	case EndProbe:
		step, r := m.EndProbe(machine.Ticket{Gen: c.Gen, Probe: true}, c.Outcome, callErr, now)
		return step, r != machine.Stale, false, r == machine.Stale
	case Renew:
		m.Renew(c.Gen, c.EndSlow)
	case Cause:
		m.SetCause(c.Gen, reasonErr(c.Reason))
	case Trip:
		cause := breaker.CauseTrip
		if c.Alone {
			cause = breaker.CauseAlone
		}
		step, ok := m.TripBy(c.Gen, c.Outcome, callErr, cause, now)
		return step, ok, false, false
	case HalfOpen:
		step, cur, ok := m.HalfOpen(c.Gen, now)
		return step, ok, !ok && cur.Gen != s.Gen, false
	}
	return machine.Step{}, false, false, false
}

// reasonErr is the error a process that follows an opening of another's
// reports (Event.Err, OpenError.Cause): who opened it and why; nil if the
// store said nothing of it.
func reasonErr(r store.Reason) error {
	if r == (store.Reason{}) {
		return nil
	}
	return &breaker.OpenedError{By: r.By, Text: r.Why}
}

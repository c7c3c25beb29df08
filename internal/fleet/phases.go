package fleet

import (
	"errors"
	"fmt"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
)

// A shared breaker's State keeps each of its concerns as one phase: a kind
// and the fields valid in it, moved only by the message that acknowledges
// it (a lease is held once the store granted it, a forcing is the fleet's
// once the store confirmed it). Check states what must hold between the
// phases; the tests call it after every step.

// ProbeKind is the phase of this process's probe.
type ProbeKind uint8

const (
	// ProbeIdle: no probe of this process's is in the store's hands.
	ProbeIdle ProbeKind = iota
	// ProbeAcquiring: a caller that won the local probe asks the store
	// for Lease.
	ProbeAcquiring
	// ProbeHeld: this process holds Lease, and its probe runs.
	ProbeHeld
	// ProbeDeciding: the probe's success or ignore is on its way to the
	// store, for Lease; what is heard meanwhile waits in Deferred.
	ProbeDeciding
	// ProbeFailing: the probe failed; the loop resolves Lease with the
	// next period once Recover decided it.
	ProbeFailing
	// ProbeReopening: the failed probe's verdict is on its way (the
	// loop's ReopenCall), for Lease: until its Decided the store holds
	// the lease for this process, and hearing it back moves nothing.
	ProbeReopening
)

// String returns "idle", "acquiring", "held", "deciding" or "failing".
func (k ProbeKind) String() string {
	return [...]string{"idle", "acquiring", "held", "deciding", "failing", "reopening"}[k]
}

// Probe is the probe's phase: Kind, with the Lease it concerns (every kind
// but ProbeIdle) and, while deciding, the newest status heard meanwhile.
type Probe struct {
	Kind     ProbeKind
	Lease    Lease
	Deferred *Heard
}

// of reports whether the probe is in phase k for the probing generation
// gen.
func (p Probe) of(k ProbeKind, gen uint64) bool { return p.Kind == k && p.Lease.Gen == gen }

// ReportKind is the phase of this process's failure report.
type ReportKind uint8

const (
	// ReportIdle: no failure report is on its way.
	ReportIdle ReportKind = iota
	// ReportInFlight: a caller's failure report is on its way to the
	// store; the failures released meanwhile are folded into the next
	// report (Folded, of the closed generation Gen; FoldedTrip: one of
	// them tripped the process's own count), which that caller makes
	// once the reply is in. A process so has at most one failure report
	// of a breaker in flight, however many of its callers fail at once.
	ReportInFlight
	// ReportEnded: as ReportInFlight, and a success of the closed
	// generation Gen came after it, which ends the run the report adds
	// to (a consecutive policy): once the reply is in, its caller sends
	// the success, before the failures folded since (Folded).
	ReportEnded
	// ReportEnding: the success that ends the run is on its way (a
	// ReportCall that Ends); the failures folded since (Folded) go once
	// its reply is in.
	ReportEnding
)

// String returns "idle", "in flight", "ended" or "ending".
func (k ReportKind) String() string {
	return [...]string{"idle", "in flight", "ended", "ending"}[k]
}

// Report is the failure report's phase.
type Report struct {
	Kind       ReportKind
	Gen        uint64
	Folded     int64
	FoldedTrip bool
}

// TripKind is the phase of a trip this process made of the fleet's
// breaker.
type TripKind uint8

const (
	// TripNone: no trip of this process's waits for anything.
	TripNone TripKind = iota
	// TripDecided: the store's verdict tripped the closed epoch Epoch,
	// and the machine's opening into generation Gen is not applied yet;
	// Await says another process's failure crossed the threshold first.
	TripDecided
	// TripAwaiting: opened here into generation Gen (until Until), this
	// process waits until Deadline to hear of another's opening of the
	// closed epoch Epoch before it opens the store itself (OpeningWait).
	TripAwaiting
	// TripAlone: opened here alone into generation Gen, the fleet short
	// of its quorum: it probes on its own and follows nothing of the
	// fleet's closed epoch until it closes, or the fleet moves on.
	TripAlone
	// TripOutage: opened into generation Gen (until Until) by a trip of
	// the fleet's count, of the closed epoch Epoch, while the store
	// could not be reached: the fleet is told when it answers.
	TripOutage
)

// String returns "none", "decided", "awaiting", "alone" or "outage".
func (k TripKind) String() string {
	return [...]string{"none", "decided", "awaiting", "alone", "outage"}[k]
}

// OwnTrip is the phase of a trip of this process's.
type OwnTrip struct {
	Kind     TripKind
	Gen      uint64
	Epoch    uint64
	Await    bool
	Until    time.Time
	Deadline time.Time
}

// ForceKind is the phase of a forcing made by hand in this process.
type ForceKind uint8

const (
	// ForceNone: no forcing of this process's waits for the store.
	ForceNone ForceKind = iota
	// ForceAsked: a caller's ForceOpen is on its way to the store.
	ForceAsked
	// ForcePending: forced open here, and not in the store (it could
	// not be reached): the fleet is forced once it answers.
	ForcePending
	// ForceSending: the fleet's forcing is on its way (a ForceCall):
	// nothing the store says before its answer is followed.
	ForceSending
)

// String returns "none", "asked", "pending" or "sending".
func (k ForceKind) String() string { return [...]string{"none", "asked", "pending", "sending"}[k] }

// RunKind is what this process knows of the shared run of consecutive
// failures.
type RunKind uint8

const (
	// RunClean: no failure of this process's is in the shared run.
	RunClean RunKind = iota
	// RunReported: this process reported failures into the run (the
	// newest in epoch In) and no success since: its next success ends
	// the run.
	RunReported
)

// String returns "clean" or "reported".
func (k RunKind) String() string { return [...]string{"clean", "reported"}[k] }

// Run is the shared run's phase, for a consecutive policy.
type Run struct {
	Kind RunKind
	In   uint64
}

// Check reports what does not hold between the phases of s, a breaker
// whose machine shows v: nil when every invariant holds. Tests call it
// after every step.
func (s State) Check(v View) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch p := s.Probe; {
	case p.Kind > ProbeReopening:
		bad("probe: unknown kind %d", p.Kind)
	case p.Kind == ProbeIdle && (p.Lease != Lease{} || p.Deferred != nil):
		bad("probe idle with a lease %+v or a deferred status", p.Lease)
	case p.Kind != ProbeIdle && p.Lease.Gen == 0:
		bad("probe %v without a lease", p.Kind)
	case p.Kind != ProbeDeciding && p.Deferred != nil:
		bad("probe %v with a deferred status: only a verdict on its way defers", p.Kind)
	case p.Kind == ProbeHeld && v.Gen < p.Lease.Gen:
		bad("probe held for generation %d, ahead of the machine's %d", p.Lease.Gen, v.Gen)
	}
	switch r := s.Report; {
	case r.Kind > ReportEnding:
		bad("report: unknown kind %d", r.Kind)
	case r.Kind == ReportIdle && r != (Report{}):
		bad("report idle with folded failures %+v", r)
	case r.Folded < 0:
		bad("report: %d failures folded", r.Folded)
	case r.Folded == 0 && r.FoldedTrip:
		bad("report: a folded trip without folded failures %+v", r)
	case r.Kind == ReportInFlight && r.Folded == 0 && r.Gen != 0:
		bad("report: a generation without folded failures %+v", r)
	case (r.Kind == ReportEnded || r.Kind == ReportEnding) && r.Gen == 0:
		bad("report %v without the generation of its success", r.Kind)
	case (r.Kind == ReportEnded || r.Kind == ReportEnding) && s.Policy.Rate > 0:
		bad("report %v under a window policy: only a consecutive run ends", r.Kind)
	}
	switch t := s.Trip; {
	case t.Kind > TripOutage:
		bad("trip: unknown kind %d", t.Kind)
	case t.Kind == TripNone && t != (OwnTrip{}):
		bad("trip none with fields %+v", t)
	case t.Kind != TripNone && t.Gen == 0:
		bad("trip %v without a generation", t.Kind)
	case (t.Kind == TripDecided || t.Kind == TripAwaiting || t.Kind == TripOutage) && t.Epoch%2 == 1:
		bad("trip %v of an opened epoch %d: a trip opens a closed one", t.Kind, t.Epoch)
	case t.Kind == TripAwaiting && t.Deadline.IsZero():
		bad("trip awaiting with no deadline")
	case t.Kind == TripAlone && s.Policy.Quorum <= 1 && !s.DryRun:
		bad("trip alone under a quorum of %d, not in a dry run: only a quorum or a dry run opens a process alone", s.Policy.Quorum)
	case t.Kind == TripAlone && v.Gen == t.Gen && v.State == breaker.Closed:
		bad("trip alone in generation %d, which is closed", t.Gen)
	case t.Kind == TripAwaiting && s.Link.Down:
		bad("trip awaiting while the store is unreachable: the outage's trip tells the fleet")
	}
	switch f := s.Force; {
	case f > ForceSending:
		bad("force: unknown kind %d", f)
	case f == ForceSending && s.Link.Down:
		bad("force sending while the store is unreachable")
	}
	switch r := s.Run; {
	case r.Kind > RunReported:
		bad("run: unknown kind %d", r.Kind)
	case r.Kind == RunClean && r.In != 0:
		bad("run clean with an epoch %d", r.In)
	case r.Kind == RunReported && s.Policy.Rate > 0:
		bad("run reported under a window policy")
	}
	if s.Calls < 0 || s.Failures < 0 || s.Policy.Rate > 0 && s.Failures > s.Calls {
		bad("counts: %d calls, %d failures", s.Calls, s.Failures)
	}
	if s.EpochAt > v.Asked {
		bad("epoch raised at status read %d, ahead of the %d started", s.EpochAt, v.Asked)
	}
	return errors.Join(errs...)
}

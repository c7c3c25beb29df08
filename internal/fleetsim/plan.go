package fleetsim

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fusebox-go/fusebox/store"
)

// Kind is a kind of event of a schedule: the service's health, a fault,
// or an operator's action.
type Kind uint8

// The kinds of events. Spans (from At to End) are the service failing,
// one replica failing, partitions, pauses, duplicate names and the spans
// of faulty calls and deliveries; the others happen at At.
const (
	// ServiceDown: every call to the service fails from At to End.
	ServiceDown Kind = iota + 1
	// BadReplica: the calls of Procs fail from At to End, the service
	// being healthy for the others (what a quorum is for).
	BadReplica
	// LateReplies: from At to End, a share Rate of the store calls of
	// Procs have their reply delayed past the caller's deadline; the
	// operation runs in the store.
	LateReplies
	// LostReplies: a share Rate of the store calls of Procs run in the
	// store, but the caller gets an error.
	LostReplies
	// LostChanges: a share Rate of the changes delivered to Procs'
	// watches are lost.
	LostChanges
	// DupChanges: a share Rate of the changes delivered to Procs are
	// delivered twice.
	DupChanges
	// LateChanges: a share Rate of the changes delivered to Procs come
	// late, after changes made after them (reordered).
	LateChanges
	// Partition: every store call of Procs fails, and their watches are
	// broken, from At to End.
	Partition
	// Pause: Procs are paused from At to End, longer than any lag: their
	// callers make no call, their store calls and their deliveries are
	// held until End (the calls then run, late).
	Pause
	// Crash: Procs stop at At (manager.Manager.Stop) and start again at
	// End under the same name, registering their breakers again.
	Crash
	// CrashNewName: as Crash, but the process starts again as a new
	// replica, under a new name.
	CrashNewName
	// CrashDefaultName: as Crash, but every life of the process, its
	// first among them, has the manager's default name, as a crash loop
	// of a replica whose name nobody set.
	CrashDefaultName
	// Twin: a second live process with the name of Procs[0] runs from At
	// to End.
	Twin
	// DataLoss: the store loses its data at At (a fresh Memory), and
	// every watch breaks, so that each resubscribes.
	DataLoss
	// Force: an operator forces Breaker open at At, through the breaker
	// handle of process Via, or directly on the store (Via < 0), as the
	// command line does.
	Force
	// Reset: an operator resets Breaker at At, as Force says where.
	Reset
	// SlowReplies: from At to End, a share Rate of the store calls of
	// Procs are answered after a delay longer than a probe lease but
	// within the caller's deadline (a congested link).
	SlowReplies
	// RampReset: an operator resets the api breaker through a process's
	// handle (or on the store, Via < 0) at At, while the fleet ramps up
	// after the service healed.
	RampReset
	// CanceledProbes: from At to End, a share Rate of the trial calls of
	// Procs are canceled by their callers (context.Canceled), and so
	// released as ignored: the lease is given back.
	CanceledProbes
	numKinds = iota + 1
)

var kindNames = [...]string{
	ServiceDown: "service-down", BadReplica: "bad-replica", LateReplies: "late-replies",
	LostReplies: "lost-replies", LostChanges: "lost-changes", DupChanges: "dup-changes",
	LateChanges: "late-changes", Partition: "partition", Pause: "pause", Crash: "crash",
	CrashNewName: "crash-new-name", CrashDefaultName: "crash-default-name", Twin: "twin",
	DataLoss: "data-loss", Force: "force", Reset: "reset", SlowReplies: "slow-replies", RampReset: "ramp-reset",
	CanceledProbes: "canceled-probes",
}

// String returns the kind's name, as a schedule prints it.
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// span reports whether events of kind k last from At to End.
func (k Kind) span() bool {
	switch k {
	case DataLoss, Force, Reset, RampReset:
		return false
	}
	return true
}

// fault reports whether an event of kind k is a fault: while one is
// active (and for a settling time after), the liveness invariants wait.
func (k Kind) fault() bool { return k != ServiceDown && k != BadReplica && k != CanceledProbes }

// Event is one event of a schedule.
type Event struct {
	Kind Kind
	// At is when it happens, from the start of the run; End, for a span,
	// when it ends.
	At, End time.Duration
	// Procs are the processes (by slot) it concerns.
	Procs []int
	// Rate is the share of calls or deliveries a span of faults touches.
	Rate float64
	// Breaker and Via are an operator's: the breaker, and the process
	// whose handle acts (Via < 0: on the store directly).
	Breaker string
	Via     int
}

// String returns the event as a schedule prints it.
func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-12v %s", e.At, e.Kind)
	if e.Kind.span() {
		fmt.Fprintf(&b, " until %v", e.End)
	}
	if len(e.Procs) > 0 {
		fmt.Fprintf(&b, " procs=%v", e.Procs)
	}
	if e.Rate > 0 {
		fmt.Fprintf(&b, " rate=%.2f", e.Rate)
	}
	if e.Kind == Force || e.Kind == Reset || e.Kind == RampReset {
		via := "store"
		if e.Via >= 0 {
			via = fmt.Sprintf("p%d", e.Via)
		}
		fmt.Fprintf(&b, " %s via %s", e.Breaker, via)
	}
	return b.String()
}

// Plan is everything a seed decides before a run.
type Plan struct {
	Seed uint64
	// Procs is how many processes run (8 or more), by slot 0..Procs-1.
	Procs int
	// Callers is how many goroutines of each process call each breaker.
	Callers int
	// Duration is the run's length, in virtual time; the last Quiet of it
	// has no event, so that the liveness invariants see the fleet settle.
	Duration, Quiet time.Duration
	// Skew is each process's clock offset.
	Skew []time.Duration
	// Events is the schedule, in order of At.
	Events []Event
	// OpenPeriod is the breakers' open period (recover.BasicTimeout's
	// Open); zero means the package's OpenPeriod.
	OpenPeriod time.Duration
	// QuorumFallback is the Config.Fallback of the quorum breaker.
	QuorumFallback store.Fallback
	// Unchecked names invariants the run does not check (a known
	// defect breaks them on every seed that fails the service).
	Unchecked []string
}

// String returns the plan with its schedule, one event a line.
func (p Plan) String() string {
	var b strings.Builder
	fallback := [...]string{store.FallbackLocal: "local", store.FailOpen: "fail_open", store.FailClosed: "fail_closed"}[p.QuorumFallback%3]
	fmt.Fprintf(&b, "seed %d: %d processes, %d callers per breaker, %v (quiet %v), open period %v, skew %v, quorum fallback %s, unchecked %v\n",
		p.Seed, p.Procs, p.Callers, p.Duration, p.Quiet, cmp.Or(p.OpenPeriod, OpenPeriod), p.Skew, fallback, p.Unchecked)
	for i, e := range p.Events {
		fmt.Fprintf(&b, "  %2d %v\n", i, e)
	}
	return b.String()
}

// Kinds is a set of event kinds a plan may draw.
type Kinds uint32

// KindsOf returns the set of ks.
func KindsOf(ks ...Kind) Kinds {
	var s Kinds
	for _, k := range ks {
		s |= 1 << k
	}
	return s
}

// Has reports whether k is in the set.
func (s Kinds) Has(k Kind) bool { return s&(1<<k) != 0 }

// Without returns the set without ks.
func (s Kinds) Without(ks ...Kind) Kinds { return s &^ KindsOf(ks...) }

// AllKinds is every kind of event.
func AllKinds() Kinds {
	var s Kinds
	for k := Kind(1); k < numKinds; k++ {
		s |= 1 << k
	}
	return s
}

// Breaker names of the simulated fleet: one shared breaker without a
// quorum (with a slow start), one with Quorum 2.
const (
	BreakerAPI    = "api"
	BreakerQuorum = "quorum"
)

// NewPlan draws the plan of seed: procs processes (at least 8), each kind
// of kinds a few times over the run.
func NewPlan(seed uint64, procs int, kinds Kinds) Plan {
	procs = max(procs, 8)
	r := draws{seed}.rand(0)
	p := Plan{Seed: seed, Procs: procs, Callers: 2, Duration: 16 * time.Second, Quiet: 9 * time.Second}
	p.Skew = make([]time.Duration, procs)
	for i := range p.Skew {
		if r.IntN(3) == 0 {
			p.Skew[i] = between(r, -3*time.Second, 3*time.Second)
		}
	}
	end := p.Duration - p.Quiet
	some := func(n int) []int {
		n = min(n, procs)
		return r.Perm(procs)[:n]
	}
	span := func(k Kind, lo, hi time.Duration, procs []int, rate float64) {
		at := between(r, 300*time.Millisecond, end-lo)
		e := Event{Kind: k, At: at, End: min(at+between(r, lo, hi), end), Procs: procs, Rate: rate}
		p.Events = append(p.Events, e)
	}
	for k := Kind(1); k < numKinds; k++ {
		if !kinds.Has(k) {
			continue
		}
		n := 1 + r.IntN(2)
		for i := range n {
			switch k {
			case ServiceDown:
				span(k, time.Second, 4*time.Second, nil, 0)
				if kinds.Has(RampReset) {
					// While the fleet ramps up after the service
					// healed.
					at := p.Events[len(p.Events)-1].End + between(r, 1200*time.Millisecond, 2500*time.Millisecond)
					p.Events = append(p.Events, Event{Kind: RampReset, At: at, Breaker: BreakerAPI, Via: r.IntN(procs+1) - 1})
				}
			case BadReplica:
				span(k, time.Second, 4*time.Second, some(1), 0)
			case CanceledProbes:
				span(k, time.Second, 4*time.Second, some(2+r.IntN(6)), 0.3+0.6*r.Float64())
			case LateReplies, LostReplies, SlowReplies:
				span(k, 300*time.Millisecond, 2*time.Second, some(1+r.IntN(3)), 0.2+0.6*r.Float64())
			case LostChanges, DupChanges, LateChanges:
				span(k, 500*time.Millisecond, 3*time.Second, some(1+r.IntN(4)), 0.2+0.7*r.Float64())
			case Partition:
				span(k, 500*time.Millisecond, 3*time.Second, some(1+r.IntN(3)), 0)
			case Pause:
				span(k, 500*time.Millisecond, 2*time.Second, some(1), 0)
			case Crash, CrashNewName:
				span(k, 100*time.Millisecond, 2*time.Second, some(1), 0)
			case CrashDefaultName:
				// One replica whose name nobody set, from its first
				// life: the other managers of the simulation share its
				// OS process, and a second one crash-looping under the
				// default name would trade numbers with it.
				span(k, 100*time.Millisecond, 2*time.Second, []int{procs - 1}, 0)
			case Twin:
				span(k, time.Second, 4*time.Second, some(1), 0)
			case DataLoss:
				p.Events = append(p.Events, Event{Kind: k, At: between(r, 300*time.Millisecond, end)})
			case Force:
				// An operator forces, and resets a little later: a
				// forcing is meant to stand until a Reset. One
				// forcing a breaker, so that its Reset lifts it and
				// nothing else (a fleet ramping up meanwhile).
				via := func() int {
					if r.IntN(2) == 0 {
						return -1
					}
					return r.IntN(procs)
				}
				name := breakerNames[i]
				if n == 1 {
					name = breakerNames[r.IntN(2)]
				}
				at := between(r, 300*time.Millisecond, end-time.Second)
				p.Events = append(p.Events,
					Event{Kind: Force, At: at, Breaker: name, Via: via()},
					Event{Kind: Reset, At: min(at+between(r, 200*time.Millisecond, 3*time.Second), end), Breaker: name, Via: via()})
			case Reset:
				if !kinds.Has(Force) {
					p.Events = append(p.Events, Event{Kind: Reset, At: between(r, 300*time.Millisecond, end), Breaker: BreakerAPI, Via: r.IntN(procs)})
				}
			}
		}
	}
	if kinds.Has(ServiceDown) {
		// In the quiet end, the service fails once more and heals:
		// the fleet opens and closes with no fault about.
		at := end + between(r, settle+100*time.Millisecond, settle+time.Second)
		p.Events = append(p.Events, Event{Kind: ServiceDown, At: at, End: at + between(r, time.Second, 2*time.Second)})
	}
	p.Sort()
	return p
}

// Sort puts the events in order of At.
func (p *Plan) Sort() {
	slices.SortStableFunc(p.Events, func(a, b Event) int { return int(a.At - b.At) })
}

// without returns p without the events whose indexes drop says.
func (p Plan) without(drop func(i int) bool) Plan {
	q := p
	q.Events = nil
	for i, e := range p.Events {
		if !drop(i) {
			q.Events = append(q.Events, e)
		}
	}
	return q
}

// draws returns the plan's draws.
func (p Plan) draws() draws { return draws{p.Seed} }

// defaultNamed reports whether the process of slot has the default name
// in every life (a CrashDefaultName of it is planned).
func (p Plan) defaultNamed(slot int) bool {
	for _, e := range p.Events {
		if e.Kind == CrashDefaultName && slices.Contains(e.Procs, slot) {
			return true
		}
	}
	return false
}

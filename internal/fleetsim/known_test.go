//go:build go1.25

package fleetsim_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/internal/fleetsim"
	"github.com/fusebox-go/fusebox/store"
)

// knownKinds are the kinds of events that expose a defect of the current
// code: the CI run leaves them out. None today: crash-default-name (defect
// 4) and canceled-probes (defect 11) joined the CI run once fixed.
var knownKinds = []fleetsim.Kind{}

// knownDefect is a defect of the fleet protocol (numbered as in the list of
// defects found on 19f756c) that the simulator reproduces: the plan of a
// seed breaks the invariant of the promise it breaks.
type knownDefect struct {
	defect    int
	name      string
	invariant string
	seed      uint64
	plan      func(seed uint64) fleetsim.Plan
}

// only returns the plan of a seed with only the kinds given (and the
// service failing), the quorum breaker failing open, and every invariant
// checked but the one defect 9 breaks: a defect's seed shows it with no
// other fault about.
func only(kinds ...fleetsim.Kind) func(uint64) fleetsim.Plan {
	return func(seed uint64) fleetsim.Plan {
		p := fleetsim.NewPlan(seed, 8, fleetsim.KindsOf(append(kinds, fleetsim.ServiceDown)...))
		p.QuorumFallback = store.FailOpen
		p.Unchecked = []string{fleetsim.InvNamesOpener}
		return p
	}
}

// localFallback is plan with the quorum breaker on the local fallback.
func localFallback(plan func(uint64) fleetsim.Plan) func(uint64) fleetsim.Plan {
	return func(seed uint64) fleetsim.Plan {
		p := plan(seed)
		p.QuorumFallback = store.FallbackLocal
		return p
	}
}

// knownDefects are the defects the simulator reproduces today; each
// seed's plan fails its invariant.
var knownDefects = []knownDefect{
	{9, "the event of a process that tripped by its own verdict names it, not the store's opener", fleetsim.InvNamesOpener, 2, func(seed uint64) fleetsim.Plan {
		p := only()(seed)
		p.Unchecked = nil
		return p
	}},
}

// fixedDefects are defects found on 19f756c that the simulator
// reproduced there, each with the seed that broke its invariant then,
// and that are fixed: TestFleetSimulatorFixed runs each plan on its
// seed and the next ones, and none may break any invariant.
var fixedDefects = []knownDefect{
	{1, "a lease granted by a reply that comes after the lease's end", fleetsim.InvTrialInLease, 32, only(fleetsim.SlowReplies)},
	{3, "a quorum bypassed by a bad replica's local trip during a partition", fleetsim.InvQuorum, 38, localFallback(only(fleetsim.BadReplica, fleetsim.Partition))},
	{4, "a quorum bypassed by a crash loop under the default name", fleetsim.InvQuorum, 1, crashLoop},
	{5, "a forcing after a data loss re-seeded away", fleetsim.InvForcingStands, 4, forceAfterDataLoss},
	{6, "a forcing whose store call failed never reaches the store", fleetsim.InvForcingReachesStore, 1, forceInPartition},
	{8, "a Reset elsewhere keeps the ramp", fleetsim.InvResetEndsRamp, 2, only(fleetsim.RampReset)},
}

// TestFleetSimulatorFixed runs the plan of each fixed defect on the seed
// that reproduced it on 19f756c and on the next seeds: every invariant
// holds.
func TestFleetSimulatorFixed(t *testing.T) {
	for _, k := range fixedDefects {
		t.Run(strconv.Itoa(k.defect)+"/"+k.invariant, func(t *testing.T) {
			for seed := k.seed; seed < k.seed+8; seed++ {
				plan := k.plan(seed)
				if v := run(t, plan).Violation; v != nil {
					report(t, plan, v)
					return
				}
			}
		})
	}
}

// crashLoop is a replica failing every call and crashing every few
// hundred milliseconds, each life under the default name.
func crashLoop(seed uint64) fleetsim.Plan {
	p := only()(seed)
	p.Events = []fleetsim.Event{{Kind: fleetsim.BadReplica, At: 300 * time.Millisecond, End: 7 * time.Second, Procs: []int{3}}}
	for at := 500 * time.Millisecond; at < 6*time.Second; at += 700 * time.Millisecond {
		p.Events = append(p.Events, fleetsim.Event{Kind: fleetsim.CrashDefaultName, At: at + time.Duration(seed)*time.Microsecond, End: at + 200*time.Millisecond, Procs: []int{3}})
	}
	p.Sort()
	return p
}

// forceAfterDataLoss is the store losing its data while the fleet is
// open, and an operator forcing the api breaker on the store right after.
func forceAfterDataLoss(seed uint64) fleetsim.Plan {
	p := only()(seed)
	at := 2500*time.Millisecond + time.Duration(seed)*7*time.Millisecond
	p.Events = append(p.Events,
		fleetsim.Event{Kind: fleetsim.ServiceDown, At: time.Second, End: 5 * time.Second},
		fleetsim.Event{Kind: fleetsim.DataLoss, At: at},
		fleetsim.Event{Kind: fleetsim.Force, At: at + 100*time.Millisecond, Breaker: fleetsim.BreakerAPI, Via: -1},
		fleetsim.Event{Kind: fleetsim.Reset, At: 6500 * time.Millisecond, Breaker: fleetsim.BreakerAPI, Via: -1})
	p.Sort()
	return p
}

// forceInPartition is an operator forcing the api breaker through the
// handle of a process cut off from the store, whose link then flaps: its
// first store call after the partition fails.
func forceInPartition(seed uint64) fleetsim.Plan {
	p := only()(seed)
	at := 1500*time.Millisecond + time.Duration(seed)*time.Millisecond
	p.Events = append(p.Events,
		fleetsim.Event{Kind: fleetsim.Partition, At: at, End: at + time.Second, Procs: []int{2}},
		fleetsim.Event{Kind: fleetsim.Force, At: at + 300*time.Millisecond, Breaker: fleetsim.BreakerAPI, Via: 2},
		fleetsim.Event{Kind: fleetsim.Reset, At: at + 6*time.Second, Breaker: fleetsim.BreakerAPI, Via: -1})
	for flap := at + time.Second + 5*time.Millisecond; flap < at+2*time.Second; flap += 25 * time.Millisecond {
		p.Events = append(p.Events, fleetsim.Event{Kind: fleetsim.Partition, At: flap, End: flap + 20*time.Millisecond, Procs: []int{2}})
	}
	p.Sort()
	return p
}

// TestFleetSimulatorKnown runs, with FUSEBOX_SIM_KNOWN=1, the seed of
// each known defect and checks that it still breaks its invariant: once
// a defect is fixed, its seed passes, this test says so, and its kind of
// event joins the CI run. With -v it prints each violation, the events
// before it and the seed's schedule; FUSEBOX_SIM_SHRINK=1 shrinks the
// schedule too. FUSEBOX_SIM_KNOWN=search:n looks for the first of seeds
// 1..n that reproduces each defect instead (a change of the simulator or
// of the manager moves every instant, and so which seeds do).
func TestFleetSimulatorKnown(t *testing.T) {
	mode := os.Getenv("FUSEBOX_SIM_KNOWN")
	if mode == "" {
		t.Skip("the known defects run with FUSEBOX_SIM_KNOWN=1")
	}
	search := 0
	if len(mode) > 7 && mode[:7] == "search:" {
		search, _ = strconv.Atoi(mode[7:])
	}
	for _, k := range knownDefects {
		t.Run(strconv.Itoa(k.defect)+"/"+k.invariant, func(t *testing.T) {
			if search > 0 {
				for seed := uint64(1); seed <= uint64(search); seed++ {
					if v := run(t, k.plan(seed)).Violation; v != nil {
						t.Logf("defect %d (%s): seed %d breaks %s", k.defect, k.name, seed, v.Invariant)
						if v.Invariant == k.invariant {
							return
						}
					}
				}
				t.Errorf("defect %d (%s): no seed of 1..%d breaks %s", k.defect, k.name, search, k.invariant)
				return
			}
			plan := k.plan(k.seed)
			v := run(t, plan).Violation
			switch {
			case v == nil:
				t.Errorf("defect %d (%s): seed %d breaks no invariant any more: fixed? move its kind into the CI run\n%v", k.defect, k.name, k.seed, plan)
			case v.Invariant != k.invariant:
				t.Errorf("defect %d (%s): seed %d breaks %s, not %s\n%v", k.defect, k.name, k.seed, v.Invariant, k.invariant, v)
			default:
				t.Logf("defect %d (%s): seed %d breaks %s at %v: %s", k.defect, k.name, k.seed, v.Invariant, v.At, v.Detail)
				if testing.Verbose() {
					t.Logf("%v\n%v", v, plan)
				}
				if os.Getenv("FUSEBOX_SIM_SHRINK") == "1" {
					short := fleetsim.Shrink(plan, v.Invariant, 200, func(p fleetsim.Plan) *fleetsim.Violation { return run(t, p).Violation })
					t.Logf("shrunk to:\n%v", short)
				}
			}
		})
	}
}

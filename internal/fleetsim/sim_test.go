//go:build go1.25

package fleetsim_test

import (
	"os"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fusebox-go/fusebox/internal/fleetsim"
	"github.com/fusebox-go/fusebox/store"
)

// run runs plan in a synctest bubble of its own.
func run(t *testing.T, plan fleetsim.Plan) fleetsim.Result {
	var res fleetsim.Result
	synctest.Test(t, func(*testing.T) { res = fleetsim.Run(plan) })
	return res
}

// ciPlan is the plan of seed in the CI run: every kind of event whose
// invariants hold on the current code (known_test.go has the others),
// operators forcing and resetting through handles and on the store, the
// quorum breaker on the local fallback on odd seeds and failing open on
// even ones; the run checks every invariant but the event half of the
// one defect 9 breaks whenever the service fails (Stats and the
// OpenError name the store's opener; an event recorded as the process
// tripped names the call that tripped it).
func ciPlan(seed uint64) fleetsim.Plan {
	p := fleetsim.NewPlan(seed, 8, fleetsim.AllKinds().Without(knownKinds...))
	if seed%2 == 0 {
		p.QuorumFallback = store.FailOpen
	}
	p.Unchecked = []string{fleetsim.InvNamesOpener}
	return p
}

// seeds returns the seeds to run: FUSEBOX_SIM_SEED's alone, or the first
// FUSEBOX_SIM_SEEDS (default n).
func seeds(t *testing.T, n int) []uint64 {
	if s := os.Getenv("FUSEBOX_SIM_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("FUSEBOX_SIM_SEED=%q: %v", s, err)
		}
		return []uint64{seed}
	}
	if s := os.Getenv("FUSEBOX_SIM_SEEDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("FUSEBOX_SIM_SEEDS=%q: %v", s, err)
		}
		n = v
	}
	list := make([]uint64, n)
	for i := range list {
		list[i] = uint64(i + 1)
	}
	return list
}

// TestFleetSimulator runs seeds of 8 processes under every kind of fault
// whose invariants hold today, and checks every invariant after every
// event. A failing seed is replayed and shrunk; FUSEBOX_SIM_SEED=n replays
// seed n alone, printing its schedule and, with -v, its log.
func TestFleetSimulator(t *testing.T) {
	list := seeds(t, 120)
	start := time.Now()
	var calls, trials int
	checked := map[string]int{}
	for _, seed := range list {
		plan := ciPlan(seed)
		if len(list) == 1 {
			t.Logf("%v", plan)
		}
		res := run(t, plan)
		calls, trials = calls+res.Calls, trials+res.Trials
		for k, n := range res.Checked {
			checked[k] += n
		}
		if len(list) == 1 && testing.Verbose() {
			for _, e := range res.Log {
				t.Logf("%v", e)
			}
		}
		if res.Violation != nil {
			report(t, plan, res.Violation)
		}
	}
	d := time.Since(start)
	t.Logf("%d seeds in %v (%.1f seeds/s): %d calls, %d trial calls; invariants checked: %v", len(list), d.Round(time.Millisecond), float64(len(list))/d.Seconds(), calls, trials, checked)
}

// report fails the test with v, the plan, and the plan shrunk to the
// events that still break the same invariant (unless FUSEBOX_SIM_SHRINK=0).
func report(t *testing.T, plan fleetsim.Plan, v *fleetsim.Violation) {
	t.Helper()
	msg := v.Error() + "\n" + plan.String()
	if os.Getenv("FUSEBOX_SIM_SHRINK") != "0" {
		short := fleetsim.Shrink(plan, v.Invariant, 60, func(p fleetsim.Plan) *fleetsim.Violation { return run(t, p).Violation })
		msg += "shrunk to:\n" + short.String()
	}
	t.Errorf("%s\nreplay: FUSEBOX_SIM_SEED=%d go test ./internal/fleetsim -run %s -v", msg, plan.Seed, t.Name())
}

// TestFleetSimulatorReplays runs seeds twice: the logs are the same, line
// for line. The manager draws the pause before it retries a failed read
// of its queue from math/rand/v2's unseeded source (manager/reads.go), so
// that a fleet does not retry in step: the plans here have every kind of
// event but those that fail a store call (partitions, pauses, late and
// lost replies), after which two runs may part by that pause.
func TestFleetSimulatorReplays(t *testing.T) {
	kinds := fleetsim.AllKinds().Without(knownKinds...).Without(fleetsim.Partition, fleetsim.Pause, fleetsim.LateReplies, fleetsim.LostReplies)
	for seed := uint64(1); seed <= 4; seed++ {
		plan := fleetsim.NewPlan(seed, 8, kinds)
		plan.QuorumFallback = store.FailOpen
		a, b := run(t, plan), run(t, plan)
		if len(a.Log) == 0 {
			t.Fatal("the run logged nothing")
		}
		for i := range min(len(a.Log), len(b.Log)) {
			if a.Log[i] != b.Log[i] {
				t.Fatalf("seed %d replayed differently at line %d:\n  %v\n  %v\n%v", seed, i, a.Log[i], b.Log[i], plan)
			}
		}
		if len(a.Log) != len(b.Log) {
			t.Fatalf("seed %d replayed with %d lines, not %d", seed, len(b.Log), len(a.Log))
		}
		t.Logf("seed %d: %d lines, twice the same", seed, len(a.Log))
	}
}

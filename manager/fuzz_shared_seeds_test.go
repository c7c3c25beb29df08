package manager_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"
)

// Shorthands for the seed scripts.
func shAcq(i byte) sharedOp   { return sharedOp{kind: shAcquire, arg: i} }
func shForce(i byte) sharedOp { return sharedOp{kind: shForceOpen, arg: i} }
func shRst(i byte) sharedOp   { return sharedOp{kind: shReset, arg: i} }

// Arguments of shRel's outcome.
const (
	shSuccess byte = iota
	shFailure
	shIgnore
)

// shRel releases the permit nth from the newest held with outcome o
// (shSuccess, shFailure, shIgnore).
func shRel(nth, o byte) sharedOp { return sharedOp{kind: shRelease, arg: 3*nth + o} }

// shEdge moves the clock to the next deadline of a manager, plus off
// nanoseconds (-1, 0 or 1).
func shEdge(off int) sharedOp { return sharedOp{kind: shAdvanceEdge, arg: byte(off + 1)} }

// shAdv moves the clock by d, one of sharedAdvances.
func shAdv(d time.Duration) sharedOp {
	for i, a := range sharedAdvances {
		if a == d {
			return sharedOp{kind: shAdvance, arg: byte(i)}
		}
	}
	panic(fmt.Sprintf("no advance of %v", d))
}

// shHold, shDeliver and shLose act on manager i's watch.
func shHold(i byte) sharedOp    { return sharedOp{kind: shWatch, arg: 3 * i} }
func shDeliver(i byte) sharedOp { return sharedOp{kind: shWatch, arg: 3*i + 1} }
func shLose(i byte) sharedOp    { return sharedOp{kind: shWatch, arg: 3*i + 2} }

// shJoin starts a manager with open period sharedOpens[open] and probe
// time sharedProbes[probe].
func shJoinOp(open, probe byte) sharedOp { return sharedOp{kind: shJoin, arg: open + 8*probe} }

// shFail and shSucceed are a call on manager i that fails or succeeds.
func shFail(i byte) []sharedOp    { return []sharedOp{shAcq(i), shRel(0, shFailure)} }
func shSucceed(i byte) []sharedOp { return []sharedOp{shAcq(i), shRel(0, shSuccess)} }

func shOps(list ...any) []sharedOp {
	var out []sharedOp
	for _, l := range list {
		switch l := l.(type) {
		case sharedOp:
			out = append(out, l)
		case []sharedOp:
			out = append(out, l...)
		default:
			panic(fmt.Sprintf("shOps: %T", l))
		}
	}
	return out
}

// shHeader is the header of n managers sharing Consecutive{Failures: k},
// manager i's open period sharedOpens[(first+i*stride)%8] and probe time
// sharedProbes[i], resyncing every sharedResyncs[resync].
func shHeader(n, k, first, stride, resync int) [4]byte {
	return [4]byte{byte(n - 2), byte(k - 1), byte(first | (stride-1)<<3), byte(resync)}
}

// withProbes sets the probe times of header h: manager i's is
// sharedProbes[(sel+i)%6].
func withProbes(h [4]byte, sel int) [4]byte {
	h[3] |= byte(sel << 2)
	return h
}

// withQuorum sets the quorum of header h (1 to 3).
func withQuorum(h [4]byte, q int) [4]byte {
	h[1] |= byte(q-1) << 6
	return h
}

// sharedSeeds are the seed scripts: together they take every edge of the
// protocol (see TestFuzzSharedSeedCorpus).
func sharedSeeds() []scriptSeed[sharedOp] {
	seeds := []scriptSeed[sharedOp]{
		{
			// A run of failures across four managers, ended by a
			// reported success and not by an unreported one; the
			// failure that reaches k trips the fleet for the opener's
			// period, and a permit from before is fenced.
			name:   "run-across-managers",
			header: shHeader(4, 3, 4, 2, 3), // open 1s, 3s, 0, 200ms; no resync
			ops: shOps(
				shFail(0), shSucceed(1), shFail(1), shSucceed(0), // the run: 1, 1 (1 reported no failure), 2, 0 (0 did)
				shFail(0), shFail(1), shSucceed(3), shAcq(2), shFail(2), // 1, 2, 2 (not reported), 3: manager 2 trips with its 0
				shRel(0, shFailure),                     // the permit from before the trip is stale
				shAcq(3), shAcq(1), shRel(1, shSuccess), // manager 3 probes, 1 is refused; closed
				shFail(3), shFail(3), shFail(1), // manager 1 trips: 3s
				shAcq(0), shEdge(-1), shAcq(0), shEdge(0), // still open a nanosecond before
				shAcq(1), shRel(0, shSuccess),
			),
		},
		{
			// A quorum of 2: one manager failing alone opens alone, and
			// runs its own periods and probes; another's failure does
			// not complete its quorum; two failing managers open the
			// fleet, which a manager open alone follows.
			name:   "quorum",
			header: withQuorum(shHeader(3, 2, 2, 1, 1), 2), // open 30ms, 200ms, 1s; resync every second
			ops: shOps(
				shFail(0), shFail(0), // 0's own two: it opens alone for 30ms
				shFail(1),                                          // the run is 3, 1 without 0's: short of the quorum
				shAcq(0), shEdge(0), shAcq(0), shRel(0, shFailure), // declined, then a failed probe of its own
				shEdge(0), shAcq(0), shRel(0, shSuccess), // it closes, alone
				shFail(1), // 2 without 0's: the fleet opens
				shAdv(time.Second), shRst(2),
				shFail(0), shFail(0), shFail(1), shFail(1), // 0 opens alone, then 1 opens the fleet
				shAcq(2),
			),
		},
		{
			name:   "probe-verdicts",
			header: shHeader(2, 1, 2, 1, 3), // open 30ms, 200ms
			ops: shOps(
				shFail(0), shEdge(0), // open 30ms, then half-open
				shAcq(1), shRel(0, shFailure), // manager 1's failed probe opens for its 200ms
				shEdge(0), shAcq(0), shRel(0, shIgnore), // an ignored probe gives the lease back
				shAcq(1), shAcq(0), shRel(0, shSuccess), // a new probe in the same epoch; closed
				shSucceed(0), shFail(1), shFail(1),
				shEdge(1), shAcq(0), shRel(0, shSuccess),
			),
		},
		{
			name:   "zero-periods",
			header: shHeader(2, 2, 0, 1, 3), // open 0, 1ms
			ops: shOps(
				shFail(0), shFail(0), // the trip's period is over at once: half-open
				shAcq(0), shRel(0, shFailure), // and so is the failed probe's
				shAcq(1), shRel(0, shFailure), // manager 1's is 1ms
				shAcq(0), shEdge(0), shAcq(0), shRel(0, shSuccess),
			),
		},
		{
			// The holder never answers: its lease runs out, another
			// manager probes in the same epoch, and the late verdict
			// changes nothing. Managers whose watch missed a lease
			// learn of it at their resync, or when their caller is
			// refused.
			name:   "lease-runs-out",
			header: withProbes(shHeader(3, 1, 4, 4, 1), 5), // open 1s, 0, 1s; probe 5s, 10s, 50ms; resync every second
			ops: shOps(
				shFail(0), shAdv(time.Second), // manager 0 half-open at 1s (and a resync); 1 and 2 wait their lag
				shHold(1), shHold(2), shAcq(0), // manager 0 probes; 1 and 2 miss the lease
				shAdv(200*time.Millisecond), shAcq(1), // manager 1's caller is refused: it follows the lease
				shAdv(time.Second), shDeliver(1), shDeliver(2), // at the resync 2 learns of it
				shAdv(sharedProbeTime),       // the lease runs out at 6s
				shAcq(1), shAdv(time.Second), // manager 1 probes; at the resync 0 and 2 follow it
				shAcq(0), shAcq(2), // declined
				shRel(0, shIgnore),  // manager 1 gives it back: all half-open
				shRel(0, shSuccess), // manager 0's late verdict
				shAdv(sharedProbeTime), shAcq(2), shRel(0, shSuccess),
			),
		},
		{
			// A lease runs out and its holder, half-open again at once,
			// takes another: the other manager, probing for the first
			// until its end and its lag, follows the second's end (a
			// probing state's deadline moved, as an open period's is).
			name:   "second-lease-moves-followers",
			header: withProbes(shHeader(2, 1, 0, 4, 2), 0), // open 0, 200ms; probe 10s, 50ms; resync 3s
			ops:    shOps(shFail(0), shAcq(0), shAdv(sharedProbeTime), shAcq(0), shAdv(time.Second)),
		},
		{
			// A probe's verdict after its lease ran out is refused by the
			// store, and its manager follows the store's answer: another
			// manager's lease.
			name:   "late-verdict",
			header: shHeader(2, 1, 4, 1, 3), // open 1s, 50ms; probe 10s, 50ms; no resync
			ops: shOps(
				shFail(0), shEdge(0), shAcq(0), shAdv(sharedProbeTime), // manager 0's lease runs out
				shAcq(1), shRel(1, shSuccess), // manager 1 probes; manager 0's late verdict
				shRel(0, shSuccess),
			),
		},
		{
			// A caller refused a lease that ends within a millisecond
			// declines for a millisecond.
			name:   "lease-floor",
			header: shHeader(2, 1, 0, 1, 3), // open 0, 1ms
			ops:    shOps(shFail(0), shAcq(0), shEdge(-1), shAcq(1), shEdge(0), shEdge(0), shAcq(1), shRel(0, shSuccess)),
		},
		{
			name:   "force-and-reset",
			header: shHeader(2, 1, 2, 1, 3), // open 30ms, 200ms
			ops: shOps(
				shAcq(0), shForce(1), shForce(0), shAdv(61*time.Second), // forced from closed, forced again, held past any period
				shRel(0, shFailure), shRst(0), // the permit from before is stale; a Reset lifts the forcing
				shFail(0), shForce(1), shRst(1), // forced from open
				shFail(1), shEdge(0), shForce(0), shRst(0), // from half-open
				shFail(0), shEdge(0), shRst(1), // reset from half-open
				shFail(0), shEdge(0), shAcq(0), shForce(1), shRel(0, shSuccess), shRst(1), // forced while probing: the verdict is fenced
				shFail(0), shEdge(0), shAcq(0), shRst(1), shRel(0, shFailure), // reset while probing: the verdict is fenced
				shFail(1), shRst(0), // reset from open
				shAcq(0), shFail(1), shRst(1), shRel(0, shFailure), // a closed breaker's Reset keeps its permits: this one trips
				shRst(0),
			),
		},
		{
			// A manager whose watch is held, or lost changes, learns
			// from its own calls' replies and from its resync; the
			// changes it hears of late change nothing.
			name:   "watch-held-and-lost",
			header: shHeader(3, 1, 4, 2, 1), // open 1s, 3s, 0; resync every second
			ops: shOps(
				shHold(2), shFail(0), // manager 2 does not hear of the trip
				shAcq(2), shRel(0, shFailure), // its call is admitted; the failure's reply says the fleet is open
				shEdge(0), shAcq(0), shRel(0, shSuccess), // closed; manager 2 does not hear of it
				shAdv(time.Second), shDeliver(2), // its resync says so; the changes it hears of late are old
				shHold(1), shFail(2), shLose(1), // manager 1 loses the trip (its period is zero)
				shAcq(1), shRel(0, shSuccess), shAdv(time.Second), // a call admitted; the resync says half-open
				shAcq(0), shAcq(1), shHold(1), shRel(0, shIgnore), shLose(1), // manager 1 follows the lease, and loses its giving back
				shAdv(time.Second), shAcq(1), shRel(0, shSuccess), // its resync says half-open
			),
		},
		{
			// A probe's verdict that reaches the store after a ForceOpen
			// or a Reset its manager has not heard of is refused there:
			// the manager applies it as ignored and follows the store.
			name:   "verdict-fenced-in-store",
			header: shHeader(3, 1, 4, 2, 3), // open 1s, 3s, 0
			ops: shOps(
				shFail(2), shHold(0), shAcq(0), shForce(1), shRel(0, shSuccess), shDeliver(0), shRst(2),
				shFail(2), shHold(2), shAcq(2), shRst(0), shRel(0, shFailure), shDeliver(2), // a failure with a period of zero
				shFail(2), shHold(1), shAcq(1), shForce(0), shRel(0, shFailure), shDeliver(1), shRst(1),
				shFail(0), shEdge(0), shHold(0), shAcq(0), shRst(1), shRel(0, shIgnore), shLose(0),
				shFail(1), shEdge(0), shAcq(1), shRel(0, shSuccess),
			),
		},
		{
			// Managers join the fleet in every state: each follows the
			// store from its Register, and one that joins a half-open
			// fleet probes for its own probe time.
			name:   "joiners",
			header: shHeader(2, 1, 4, 1, 3), // open 1s, 50ms
			ops: shOps(
				shFail(0), shJoinOp(0, 1), // joins an open fleet: open until the opener's deadline
				shEdge(0), shJoinOp(2, 2), // joins a half-open one, and probes for its 300ms
				shAcq(3), shRel(0, shSuccess), shFail(3), shEdge(0), // closed, and tripped by the joiner
				shAcq(2), shJoinOp(1, 4), shAcq(4), shEdge(0), // the joiner of a probing fleet follows the lease
				shForce(0), shJoinOp(3, 3), // a sixth manager is past the bound: nothing
				shAcq(3), shRst(4), shAcq(2), shRel(0, shFailure),
			),
		},
		{
			name:   "run-forgotten",
			header: shHeader(2, 2, 4, 1, 3),
			ops: shOps(
				shFail(0), shAdv(61*time.Second), shFail(1), // the first failure is forgotten
				shFail(0), // the second of the run trips
			),
		},
	}
	// Longer scripts drawn at random, with fixed seeds.
	for i, h := range [][4]byte{shHeader(3, 2, 1, 2, 0), shHeader(4, 1, 5, 3, 1), shHeader(2, 3, 3, 1, 2), withQuorum(shHeader(4, 1, 2, 1, 1), 2), withQuorum(shHeader(4, 2, 3, 2, 0), 3)} {
		r := rand.New(rand.NewPCG(uint64(i), 2027))
		var ops []sharedOp
		for range 150 {
			ops = append(ops, sharedOp{kind: sharedOpTable[r.IntN(len(sharedOpTable))], arg: byte(r.IntN(24))})
		}
		seeds = append(seeds, scriptSeed[sharedOp]{name: fmt.Sprintf("random-%d", i), header: h, ops: ops})
	}
	return seeds
}

// updateSharedSeeds rewrites the seed corpus of FuzzSharedModel from
// sharedSeeds:
//
//	go test ./manager -run TestFuzzSharedSeedCorpus -fusebox.update-shared-seeds
var updateSharedSeeds = flag.Bool("fusebox.update-shared-seeds", false, "rewrite testdata/fuzz/FuzzSharedModel from the seed scripts")

// sharedSeedDir is where go test finds the seed corpus of FuzzSharedModel.
var sharedSeedDir = filepath.Join("testdata", "fuzz", "FuzzSharedModel")

// sharedEdges are the protocol's edges the seed corpus must take.
var sharedEdges = []string{
	"managers-2", "managers-3", "managers-4",
	// The shared run of failures, and the trip.
	"trip", "trip-across-managers", "opener-decides", "trip-period-over",
	"run-ended", "unreported-success", "run-forgotten", "run-deleted-by-closing",
	// The open period and the probe.
	"declined", "open-period-ends", "probe-granted", "probe-refused",
	"lease-learnt-by-resync", "probe-success", "probe-failure", "reopen-period-over",
	"probe-ignored", "lease-ran-out", "probe-time-ends", "probe-again-in-epoch",
	"ran-out-prober-follows",
	// Manual control, from every state of the fleet.
	"force-from-closed", "force-from-open", "force-from-half_open", "force-from-probing", "force-from-forced",
	"reset-from-closed", "reset-from-open", "reset-from-half_open", "reset-from-probing", "reset-from-forced",
	"reset-keeps-permits",
	// Fenced outcomes and verdicts: they change nothing.
	"fenced-call-by-trip", "fenced-call-by-force",
	"fenced-probe-by-timer", "fenced-probe-by-force", "fenced-probe-by-reset",
	"verdict-fenced-in-store", "late-verdict-refused",
	// Changes heard late or lost: a manager learns from its calls and its
	// resync, and old changes change nothing.
	"watch-held", "changes-delivered-late", "changes-lost", "late-echo-ignored",
	"admitted-unaware", "failure-while-fleet-open", "missed-change-learnt-by-reply",
	"missed-close-learnt-by-resync", "missed-opening-learnt-by-resync", "lost-lease-learnt-by-resync",
	// A quorum: a manager opens alone, probes alone, follows the fleet.
	"trip-alone", "quorum-short", "probe-alone", "alone-reopens", "alone-closes", "alone-follows-fleet",
	// Managers joining the fleet in every state.
	"join-closed", "join-open", "join-half_open", "join-probing", "join-forced", "managers-5",
}

// The seed corpus in testdata/fuzz/FuzzSharedModel is the seed scripts
// (rewrite it with -fusebox.update-shared-seeds), and, played against the
// model, takes every edge of the shared protocol in sharedEdges.
func TestFuzzSharedSeedCorpus(t *testing.T) {
	files := seedCorpus(t, sharedSeedDir, encodeSeeds(sharedSeeds(), encodeShared), *updateSharedSeeds, "update-shared-seeds")
	edges := map[string]int{}
	var ops, steps, checks int
	for _, f := range files {
		var rep sharedReport
		t.Run(f.name, func(t *testing.T) {
			rep = runSharedScript(t, f.data)
			t.Logf("edges: %v", rep.edges)
		})
		for e, n := range rep.edges {
			edges[e] += n
		}
		ops, steps, checks = ops+rep.ops, steps+rep.steps, checks+rep.checks
	}
	taken := edgesTaken(t, edges, sharedEdges)
	t.Logf("%d seeds, %d operations, %d clock stops, %d checks; edges taken:\n%s", len(files), ops, steps, checks, taken)
}

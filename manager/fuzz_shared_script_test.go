package manager_test

import (
	"fmt"
	"time"

	"github.com/fusebox-go/fusebox/classify"
)

// sharedOpKind is one operation of a shared script.
type sharedOpKind uint8

const (
	// shAcquire: a caller on manager arg%n asks for a permit; one granted
	// is held by the script.
	shAcquire sharedOpKind = iota
	// shRelease releases a held permit, the (arg/3)-th from the newest,
	// with outcome arg%3 (success, failure, ignore).
	shRelease
	// shAdvance moves the clock by sharedAdvances[arg%len].
	shAdvance
	// shAdvanceEdge moves the clock to the next deadline of a manager, one
	// nanosecond before it, at it, or one after (arg%3).
	shAdvanceEdge
	// shForceOpen and shReset are ForceOpen and Reset on manager arg%n.
	shForceOpen
	shReset
	// shWatch acts on the watch of manager (arg/3)%n: from now on it holds
	// the changes the store delivers (arg%3 == 0), or it hands them over
	// late, in order (1), or loses them (2, a pub/sub message lost).
	shWatch
	// shJoin starts one more manager (up to sharedMaxManagers), with open
	// period sharedOpens[arg%8] and probe time sharedProbes[(arg/8)%6],
	// and registers the breaker: it joins the fleet in whatever state.
	shJoin

	numSharedOps
)

var sharedOpNames = [numSharedOps]string{"acquire", "release", "advance", "advance-edge", "force-open", "reset", "watch", "join"}

type sharedOp struct {
	kind sharedOpKind
	arg  byte
}

func (o sharedOp) String() string {
	switch o.kind {
	case shRelease:
		return fmt.Sprintf("release(#%d from the newest, %v)", o.arg/3, fuzzOutcomeOf(o.arg))
	case shAdvance:
		return fmt.Sprintf("advance(%v)", sharedAdvances[int(o.arg)%len(sharedAdvances)])
	case shAdvanceEdge:
		return fmt.Sprintf("advance-edge(%+dns)", int(o.arg%3)-1)
	case shWatch:
		return fmt.Sprintf("watch(%d, %s)", o.arg/3, [3]string{"hold", "deliver", "lose"}[o.arg%3])
	case shJoin:
		return fmt.Sprintf("join(open %v, probe %v)", sharedOpens[o.arg%8], sharedProbes[int(o.arg/8)%len(sharedProbes)])
	}
	return fmt.Sprintf("%s(%d)", sharedOpNames[o.kind], o.arg)
}

func fuzzOutcomeOf(arg byte) classify.Outcome {
	return [3]classify.Outcome{classify.Success, classify.Failure, classify.Ignore}[arg%3]
}

// The values the header and the operations choose from.
var (
	// sharedOpens are the open periods of the managers' Recovers: zero
	// (a trip whose period is over at once) included.
	sharedOpens = []time.Duration{0, time.Millisecond, 30 * time.Millisecond, 200 * time.Millisecond, time.Second, 50 * time.Millisecond, 3 * time.Second, 700 * time.Millisecond}
	// sharedProbes are the probe times of the managers' Recovers, the
	// leases they take.
	sharedProbes = []time.Duration{sharedProbeTime, 50 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second, time.Millisecond, 5 * time.Second}
	// sharedResyncs are the managers' Options.Resync: an hour is never, in
	// a script.
	sharedResyncs = []time.Duration{250 * time.Millisecond, time.Second, 3 * time.Second, time.Hour}
	// sharedAdvances are the clock's moves: up to past a lease
	// (sharedProbeTime) and past the memory store's FailureTTL.
	sharedAdvances = []time.Duration{
		time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
		20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
		300 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second,
		3 * time.Second, sharedProbeTime, sharedProbeTime, 61 * time.Second,
	}
)

// Bounds of one script, so that an input stays quick: operations, and
// instants a clock advance stops at (each costs the mock clock a real
// millisecond or more).
const (
	sharedMaxManagers = 5
	sharedMaxOps      = 200
	sharedMaxSteps    = 300
	sharedMaxHeld     = 32
)

// sharedHeader is the configuration the first four bytes select.
type sharedHeader struct {
	n      int
	k      int
	quorum int // Config.Quorum: 1 (none), 2 or 3
	opens  []time.Duration
	probes []time.Duration
	resync time.Duration
}

// decodeShared splits an input into its header and its operations.
func decodeShared(data []byte) (sharedHeader, []sharedOp) {
	var h [4]byte
	copy(h[:], data)
	hd := sharedHeader{n: 2 + int(h[0]%3), k: 1 + int(h[1]%4), quorum: 1 + int(h[1]>>6)%3, resync: sharedResyncs[int(h[3])%len(sharedResyncs)]}
	first, stride := int(h[2]%8), 1+int(h[2]>>3)%4
	for i := range hd.n {
		hd.opens = append(hd.opens, sharedOpens[(first+i*stride)%len(sharedOpens)])
		hd.probes = append(hd.probes, sharedProbes[(int(h[3]>>2)+i)%len(sharedProbes)])
	}
	var ops []sharedOp
	if len(data) > 4 {
		body := data[4:]
		for i := 0; i+1 < len(body) && len(ops) < sharedMaxOps; i += 2 {
			ops = append(ops, sharedOp{kind: sharedOpTable[int(body[i])%len(sharedOpTable)], arg: body[i+1]})
		}
	}
	return hd, ops
}

// sharedOpTable maps an operation's byte to its kind: calls are frequent,
// clock moves less, manual actions rare, so that a random script goes
// round the protocol rather than resetting it.
var sharedOpTable = [17]sharedOpKind{
	shAcquire, shRelease, shAcquire, shRelease, shAcquire, shRelease, shAcquire, shRelease,
	shAdvance, shAdvance, shAdvanceEdge, shAdvanceEdge, shForceOpen, shReset, shWatch, shWatch,
	shJoin,
}

// encodeShared is the inverse of decodeShared.
func encodeShared(header [4]byte, ops []sharedOp) []byte {
	out := append([]byte(nil), header[:]...)
	for _, o := range ops {
		b := 0
		for sharedOpTable[b] != o.kind {
			b++
		}
		out = append(out, byte(b), o.arg)
	}
	return out
}

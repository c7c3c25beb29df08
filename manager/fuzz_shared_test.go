package manager_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/store"
)

// FuzzSharedModel decodes its input into a script over two to four
// managers (up to five with those that join during it) that share one
// breaker of Consecutive{Failures: k} through one store.NewMemory on one
// mock clock, and plays it against fleetModel, the reference model of one
// fleet breaker in sharedmodel_test.go. Every operation is followed by two
// passes of Sync over every manager: on the memory store Sync is a
// barrier, so the script is deterministic. A manager's watch can be made
// to hold the changes it hears of, to hand them over late, or to lose
// them, which is how a verdict or a call reaches the store after a change
// its manager has not heard of.
//
// After every operation, and at every instant a clock advance stops at, it
// checks:
//
//   - the store's status (epoch, open period, lease, forcing) is the
//     model's: every trip, probe, verdict and manual action happened at the
//     model's call, and nothing else moved the store;
//   - every manager's snapshot (state, until, forced, generation) is the
//     model's view of it, and, once it has heard of every change, agrees
//     with the fleet: after a trip every manager is open until the
//     opener's trip instant plus its Recover's open period; a manager
//     forced open stays so until a Reset anywhere;
//   - at most one probe permit is live per epoch, the one of the store's
//     epoch holds the store's lease, and no probe is granted while the
//     fleet is open, forced or probing elsewhere; a verdict or an outcome
//     fenced by a trip, a timer, a ForceOpen or a Reset changes nothing.
//
// The input is a header of four bytes (how many managers, k, their open
// periods, their probe times and the resync interval) and then pairs of
// bytes, an operation and its argument; see decodeShared. The seed corpus
// in testdata/fuzz/FuzzSharedModel takes every edge of the protocol (see
// TestFuzzSharedSeedCorpus); go test replays it on every run, and
//
//	go test ./manager -run '^$' -fuzz FuzzSharedModel -fuzztime 5m
//
// searches for more.
func FuzzSharedModel(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		runSharedScript(t, data)
	})
}

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
	opens  []time.Duration
	probes []time.Duration
	resync time.Duration
}

// decodeShared splits an input into its header and its operations.
func decodeShared(data []byte) (sharedHeader, []sharedOp) {
	var h [4]byte
	copy(h[:], data)
	hd := sharedHeader{n: 2 + int(h[0]%3), k: 1 + int(h[1]%4), resync: sharedResyncs[int(h[3])%len(sharedResyncs)]}
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

// sharedReport is what a played script went through.
type sharedReport struct {
	ops, steps, checks int
	edges              map[string]int
	alt                int // views where the manager showed the model's alternative
}

// sharedHeld is a permit held by the script: the real one and the model's.
type sharedHeld struct {
	real  manager.Permit
	model *fleetPermit
}

// sharedLogger discards the managers' reports.
var sharedLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// errSharedBoom is a failing call's error.
var errSharedBoom = errors.New("shared boom")

// gatedWatch is a manager's way to the shared memory store, through which
// the script holds, hands over late or loses the changes its watch hears
// of: a delayed or lost pub/sub message, made deterministic.
type gatedWatch struct {
	*store.Memory

	mu      sync.Mutex
	fn      func(store.Change)
	holding bool
	queue   []store.Change
}

// Watch implements store.Store, through the gate.
func (g *gatedWatch) Watch(ctx context.Context, ready func(), fn func(store.Change)) error {
	g.mu.Lock()
	g.fn = fn
	g.mu.Unlock()
	return g.Memory.Watch(ctx, ready, func(c store.Change) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.holding {
			g.queue = append(g.queue, c)
			return
		}
		fn(c)
	})
}

// hold makes the gate hold the changes from now on.
func (g *gatedWatch) hold() {
	g.mu.Lock()
	g.holding = true
	g.mu.Unlock()
}

// open hands over (deliver) or loses the held changes, and lets the
// next ones through.
func (g *gatedWatch) open(deliver bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if deliver {
		for _, c := range g.queue {
			g.fn(c)
		}
	}
	g.queue, g.holding = nil, false
}

// syncFleet syncs every manager twice in order: on the memory store every
// store call and change of the operation is applied everywhere then.
func syncFleet(ms []*manager.Manager) {
	for range 2 {
		for _, m := range ms {
			m.Sync()
		}
	}
}

// runSharedScript plays data against a fleet of managers and the model,
// failing t at the first difference.
func runSharedScript(t testing.TB, data []byte) sharedReport {
	hd, ops := decodeShared(data)
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	const name = "fleet"
	var ms []*manager.Manager
	var bs []*manager.Breaker
	var gates []*gatedWatch
	start := func(open, probe time.Duration) {
		m := manager.Start(manager.Options{Clock: mock, Logger: sharedLogger, Resync: hd.resync})
		t.Cleanup(m.Stop)
		gate := &gatedWatch{Memory: mem}
		b, err := m.Register(name, manager.Config{
			Strategy: breaker.Consecutive{Failures: hd.k},
			Recover:  fixedPeriods{open: open, probe: probe},
			Store:    gate,
		})
		if err != nil {
			t.Fatalf("Register on manager %d: %v", len(bs), err)
		}
		ms, bs, gates = append(ms, m), append(bs, b), append(gates, gate)
	}
	for i := range hd.n {
		start(hd.opens[i], hd.probes[i])
	}
	syncFleet(ms)
	mod := newFleetModel(hd.k, hd.opens, hd.probes, hd.resync, mock.Now())
	t0 := mock.Now()

	rep := sharedReport{edges: mod.edges}
	var held []sharedHeld
	var trace strings.Builder
	fmt.Fprintf(&trace, "%d managers, Consecutive{Failures: %d}, open periods %v, probe times %v, resync %v\n", hd.n, hd.k, hd.opens, hd.probes, hd.resync)
	step := -1
	fatalf := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("step %d at +%v: %s\nscript so far:\n%s", step, mock.Now().Sub(t0), fmt.Sprintf(format, args...), trace.String())
	}
	check := func() {
		t.Helper()
		rep.checks++
		checkFleet(fatalf, mod, mem, name, bs, held, &rep)
	}
	defer func() {
		// The model panics where the managers left it in a state the
		// protocol has no rule for: a failure of the script.
		if p := recover(); p != nil {
			fatalf("%v", p)
		}
	}()
	check()

	for i, op := range ops {
		step = i
		rep.ops++
		fmt.Fprintf(&trace, "  %3d +%v %v\n", i, mock.Now().Sub(t0), op)
		switch op.kind {
		case shAcquire:
			mi := int(op.arg) % len(bs)
			p, err := bs[mi].Acquire(context.Background())
			if err == nil && p.Probe() {
				// At the instant it is granted, no other probe of its
				// epoch is live.
				for _, h := range held {
					if h.model.probe && h.model.epoch == mod.store.epoch && liveProbe(bs[h.model.mgr], h.model) {
						fatalf("manager %d got the probe while manager %d's probe (gen %d) of the same epoch %d is live", mi, h.model.mgr, h.model.gen, h.model.epoch)
					}
				}
			}
			fleetWas := mod.fleetName()
			mp := mod.acquire(mi)
			switch {
			case mp == nil:
				fmt.Fprintf(&trace, "        declined: %v\n", err)
			case mp.probe:
				fmt.Fprintf(&trace, "        the probe, gen %d, epoch %d\n", mp.gen, mp.epoch)
			default:
				fmt.Fprintf(&trace, "        a permit, gen %d\n", mp.gen)
			}
			switch {
			case mp == nil:
				if !errors.Is(err, breaker.ErrOpen) {
					fatalf("Acquire on manager %d returned %v (probe %v); want declined (the fleet is %s)", mi, err, p.Probe(), fleetWas)
				}
			case err != nil:
				fatalf("Acquire on manager %d returned %v; want a permit (probe %v)", mi, err, mp.probe)
			case p.Probe() != mp.probe:
				fatalf("Acquire on manager %d returned a permit with Probe() %v, want %v (the fleet was %s)", mi, p.Probe(), mp.probe, fleetWas)
			default:
				held = append(held, sharedHeld{p, mp})
				if len(held) > sharedMaxHeld {
					// Forget the oldest: the script never releases it.
					mod.forget(held[0].model)
					held = held[1:]
				}
			}
		case shRelease:
			if len(held) == 0 {
				continue
			}
			j := len(held) - 1 - int(op.arg/3)%len(held)
			h := held[j]
			held = append(held[:j], held[j+1:]...)
			o := fuzzOutcomeOf(op.arg)
			fmt.Fprintf(&trace, "        the permit of manager %d, gen %d, probe %v\n", h.model.mgr, h.model.gen, h.model.probe)
			h.real.ReleaseOutcome(o)
			mod.release(h.model, o)
		case shAdvance, shAdvanceEdge:
			target := mod.now.Add(sharedAdvances[int(op.arg)%len(sharedAdvances)])
			if op.kind == shAdvanceEdge {
				d := mod.nextDeadline()
				if d.IsZero() {
					continue
				}
				target = d.Add(time.Duration(int(op.arg%3) - 1))
			}
			for mod.now.Before(target) {
				w := mod.next()
				if w.IsZero() || w.After(target) {
					w = target
				}
				mock.Add(w.Sub(mod.now))
				syncFleet(ms)
				mod.advanceTo(w)
				if rep.steps++; rep.steps > sharedMaxSteps {
					return rep
				}
				check()
			}
			continue
		case shForceOpen:
			mi := int(op.arg) % len(bs)
			if err := bs[mi].ForceOpen(); err != nil {
				fatalf("ForceOpen on manager %d: %v", mi, err)
			}
			mod.forceOpen(mi)
		case shReset:
			mi := int(op.arg) % len(bs)
			if err := bs[mi].Reset(); err != nil {
				fatalf("Reset on manager %d: %v", mi, err)
			}
			mod.reset(mi)
		case shJoin:
			if len(bs) == sharedMaxManagers {
				continue
			}
			open, probe := sharedOpens[op.arg%8], sharedProbes[int(op.arg/8)%len(sharedProbes)]
			start(open, probe)
			mod.join(open, probe)
		case shWatch:
			mi := int(op.arg/3) % len(bs)
			switch op.arg % 3 {
			case 0:
				gates[mi].hold()
				mod.hold(mi)
			case 1:
				gates[mi].open(true)
				mod.deliver(mi)
			case 2:
				gates[mi].open(false)
				mod.drop(mi)
			}
		}
		syncFleet(ms)
		check()
	}
	return rep
}

// liveProbe reports whether the probe permit p still holds its manager's
// probing state.
func liveProbe(b *manager.Breaker, p *fleetPermit) bool {
	s := b.Snapshot()
	return s.State == breaker.Probing && s.Gen == p.gen
}

// checkFleet compares the store and every manager with the model.
func checkFleet(fatalf func(string, ...any), mod *fleetModel, mem *store.Memory, name string, bs []*manager.Breaker, held []sharedHeld, rep *sharedReport) {
	now := mod.now
	f := &mod.store

	// The store: every decision at the model's call.
	sts, err := mem.Status(context.Background(), []string{name})
	if err != nil || len(sts) != 1 {
		fatalf("the store's status: %v, %v", sts, err)
	}
	open, probe := f.remaining(now)
	want := store.Status{Epoch: f.epoch, Open: open, Probe: probe, Forced: f.forced && f.opened()}
	got := sts[0]
	if got.Opened() && !got.Forced && got.Reason.By == "" {
		// Every opening a manager makes names it.
		fatalf("the store: an opening without its opener: %+v (the fleet is %s)", got, mod.fleetName())
	}
	got.Reason = store.Reason{}
	if got != want {
		fatalf("the store:\n got  %+v\n want %+v (the fleet is %s)", sts[0], want, mod.fleetName())
	}

	// A trip: every manager is open until the opener's trip instant plus
	// its open period, or half-open if that period is zero.
	if mod.tripped {
		mod.tripped = false
		until := mod.tripAt.Add(mod.mgrs[mod.opener].open)
		for i, b := range bs {
			if mod.mgrs[i].held || mod.mgrs[i].unsure {
				continue // it has not heard of the trip
			}
			s := b.Snapshot()
			if until.After(now) && (s.State != breaker.Open || !s.Until.Equal(until)) || !until.After(now) && s.State != breaker.HalfOpen {
				fatalf("manager %d tripped by manager %d at %s: %v until %s; want open until %s", i, mod.opener, untilString(mod.tripAt), s.State, untilString(s.Until), untilString(until))
			}
		}
	}

	// Every manager: its view, and the fleet's state.
	fleet := f.state(now)
	for i, b := range bs {
		s := b.Snapshot()
		v := &mod.mgrs[i]
		if !viewIs(s, v) {
			if v.alt == nil || !viewIs(s, v.alt) {
				alt := ""
				if v.alt != nil {
					alt = "\n or   " + viewString(v.alt)
				}
				fatalf("manager %d:\n got  %v gen=%d until=%s forced=%v\n want %s%s\n(the fleet is %s)", i, s.State, s.Gen, untilString(s.Until), s.Forced, viewString(v), alt, mod.fleetName())
			}
			rep.alt++
			*v = *v.alt
		}
		v.alt = nil
		if s.Halted {
			fatalf("manager %d is halted", i)
		}
		if v.held || v.unsure {
			// It has not heard of every change: it follows the fleet
			// again once it learnt what it missed.
			if !v.held && convergedWith(s, v, f, now) {
				v.unsure = false
			}
			continue
		}
		switch {
		case fleet == breaker.Closed, fleet == breaker.HalfOpen && s.State != breaker.Probing:
			if s.State != fleet {
				fatalf("manager %d is %v; the fleet is %v", i, s.State, fleet)
			}
		case fleet == breaker.Open:
			if s.State != breaker.Open || s.Forced != f.forced {
				fatalf("manager %d is %v (forced %v); the fleet is open (forced %v)", i, s.State, s.Forced, f.forced)
			}
			if !f.forced && !s.Until.Equal(f.openTo) {
				fatalf("manager %d is open until %s; the fleet until %s", i, untilString(s.Until), untilString(f.openTo))
			}
		case fleet == breaker.Probing:
			// The holder probes; another follows its lease once it
			// learnt of it, and is half-open until then.
			if i == f.holder && s.State != breaker.Probing || s.State != breaker.HalfOpen && s.State != breaker.Probing {
				fatalf("manager %d is %v; the fleet is probing (manager %d holds the lease)", i, s.State, f.holder)
			}
			if s.State == breaker.Probing && !s.Until.Equal(f.probeTo) && !v.late {
				fatalf("manager %d probes until %s; the lease ends at %s", i, untilString(s.Until), untilString(f.probeTo))
			}
		default:
			// Half-open: a manager refused a lease that was about to end
			// follows it a little longer (see fleetModel.acquire).
			if !(v.late && s.State == breaker.Probing) {
				fatalf("manager %d is %v; the fleet is half-open", i, s.State)
			}
		}
	}

	// The probe: at most one live permit per epoch; one of the store's
	// epoch is the lease holder's, and one of an older epoch is live only
	// on a manager that has not heard of the newer one.
	live := map[uint64]int{}
	for _, h := range held {
		p := h.model
		if !p.probe || !liveProbe(bs[p.mgr], p) {
			continue
		}
		if live[p.epoch]++; live[p.epoch] > 1 {
			fatalf("two probe permits of epoch %d are live", p.epoch)
		}
		v := &mod.mgrs[p.mgr]
		switch {
		case p.epoch == f.epoch && (f.holder != p.mgr || f.holderGen != p.gen || probe == 0):
			fatalf("manager %d's probe (gen %d) is live, but the lease is %d's (%v left)", p.mgr, p.gen, f.holder, probe)
		case p.epoch != f.epoch && !v.held && !v.unsure:
			fatalf("manager %d's probe (gen %d) of epoch %d is live in epoch %d", p.mgr, p.gen, p.epoch, f.epoch)
		}
	}
}

func viewIs(s *breaker.Snapshot, v *mgrView) bool {
	return s.State == v.state && s.Gen == v.gen && s.Forced == v.forced && s.Until.Equal(v.until)
}

func viewString(v *mgrView) string {
	return fmt.Sprintf("%v gen=%d until=%s forced=%v", v.state, v.gen, untilString(v.until), v.forced)
}

func untilString(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmt.Sprintf("+%v", t.Sub(time.Unix(0, 0).UTC()))
}

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

// sharedSeeds are the seed scripts: together they take every edge of the
// protocol (see TestFuzzSharedSeedCorpus).
func sharedSeeds() []fuzzSeedShared {
	seeds := []fuzzSeedShared{
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
			// changes nothing. Managers learn of a lease at their
			// resync, or when their caller is refused.
			name:   "lease-runs-out",
			header: withProbes(shHeader(3, 1, 4, 4, 1), 5), // open 1s, 0, 1s; probe 5s, 10s, 50ms; resync every second
			ops: shOps(
				shFail(0), shAdv(time.Second), // half-open at 1s (and a resync)
				shAcq(0), shAdv(time.Second), // manager 0 probes; at the resync 1 and 2 learn of it
				shAdv(sharedProbeTime),       // the lease runs out at 6s
				shAcq(1), shAdv(time.Second), // manager 1 probes; at the resync 0 and 2 follow it
				shAcq(0), shAcq(2), // declined
				shRel(0, shIgnore),  // manager 1 gives it back: all half-open
				shRel(0, shSuccess), // manager 0's late verdict
				shAdv(sharedProbeTime), shAcq(2), shRel(0, shSuccess),
			),
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
				shFail(0), shEdge(0), shAcq(1), shForce(0), shRel(0, shSuccess), shRst(1), // forced while probing: the verdict is fenced
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
	for i, h := range [][4]byte{shHeader(3, 2, 1, 2, 0), shHeader(4, 1, 5, 3, 1), shHeader(2, 3, 3, 1, 2)} {
		r := rand.New(rand.NewPCG(uint64(i), 2027))
		var ops []sharedOp
		for range 150 {
			ops = append(ops, sharedOp{kind: sharedOpTable[r.IntN(len(sharedOpTable))], arg: byte(r.IntN(24))})
		}
		seeds = append(seeds, fuzzSeedShared{name: fmt.Sprintf("random-%d", i), header: h, ops: ops})
	}
	return seeds
}

type fuzzSeedShared struct {
	name   string
	header [4]byte
	ops    []sharedOp
}

// updateSharedSeeds rewrites the seed corpus of FuzzSharedModel from
// sharedSeeds:
//
//	go test ./manager -run TestFuzzSharedSeedCorpus -fusebox.update-shared-seeds
var updateSharedSeeds = flag.Bool("fusebox.update-shared-seeds", false, "rewrite testdata/fuzz/FuzzSharedModel from the seed scripts")

// sharedSeedDir is where go test finds the seed corpus of FuzzSharedModel.
var sharedSeedDir = filepath.Join("testdata", "fuzz", "FuzzSharedModel")

// sharedCorpusFile is a seed in the format go test reads from testdata/fuzz.
func sharedCorpusFile(data []byte) []byte {
	return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(data)))
}

// parseSharedCorpusFile reads a one-argument []byte corpus file.
func parseSharedCorpusFile(b []byte) ([]byte, error) {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[0] != "go test fuzz v1" {
		return nil, fmt.Errorf("not a one-value corpus file")
	}
	v, ok := strings.CutPrefix(lines[1], "[]byte(")
	if !ok || !strings.HasSuffix(v, ")") {
		return nil, fmt.Errorf("not a []byte value: %q", lines[1])
	}
	s, err := strconv.Unquote(strings.TrimSuffix(v, ")"))
	return []byte(s), err
}

// sharedEdges are the protocol's edges the seed corpus must take.
var sharedEdges = []string{
	"managers-2", "managers-3", "managers-4",
	// The shared run of failures, and the trip.
	"trip", "trip-across-managers", "opener-decides", "trip-period-over",
	"run-ended", "unreported-success", "run-forgotten",
	// The open period and the probe.
	"declined", "open-period-ends", "probe-granted", "probe-refused",
	"lease-learnt-by-resync", "probe-success", "probe-failure", "reopen-period-over",
	"probe-ignored", "lease-ran-out", "probe-time-ends", "probe-again-in-epoch", "refused-lease-floor",
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
	// Managers joining the fleet in every state.
	"join-closed", "join-open", "join-half_open", "join-probing", "join-forced", "managers-5",
}

// The seed corpus in testdata/fuzz/FuzzSharedModel is the seed scripts
// (rewrite it with -fusebox.update-shared-seeds), and, played against the
// model, takes every edge of the shared protocol in sharedEdges.
func TestFuzzSharedSeedCorpus(t *testing.T) {
	seeds := sharedSeeds()
	if *updateSharedSeeds {
		require.NoError(t, os.MkdirAll(sharedSeedDir, 0o755))
		for _, s := range seeds {
			path := filepath.Join(sharedSeedDir, s.name)
			require.NoError(t, os.WriteFile(path, sharedCorpusFile(encodeShared(s.header, s.ops)), 0o644))
		}
	}
	for _, s := range seeds {
		b, err := os.ReadFile(filepath.Join(sharedSeedDir, s.name))
		require.NoError(t, err, "seed %s (go test ./manager -run TestFuzzSharedSeedCorpus -fusebox.update-shared-seeds writes it)", s.name)
		assert.True(t, bytes.Equal(b, sharedCorpusFile(encodeShared(s.header, s.ops))), "seed %s is out of date", s.name)
	}

	files, err := os.ReadDir(sharedSeedDir)
	require.NoError(t, err)
	edges := map[string]int{}
	var ops, steps, checks int
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(sharedSeedDir, f.Name()))
		require.NoError(t, err)
		data, err := parseSharedCorpusFile(b)
		require.NoError(t, err, "corpus file %s", f.Name())
		var rep sharedReport
		t.Run(f.Name(), func(t *testing.T) {
			rep = runSharedScript(t, data)
			t.Logf("edges: %v", rep.edges)
		})
		for e, n := range rep.edges {
			edges[e] += n
		}
		ops, steps, checks = ops+rep.ops, steps+rep.steps, checks+rep.checks
	}
	for _, e := range sharedEdges {
		assert.Positive(t, edges[e], "no seed takes %s", e)
	}
	var taken []string
	for e, n := range edges {
		taken = append(taken, fmt.Sprintf("%s: %d", e, n))
	}
	sort.Strings(taken)
	t.Logf("%d seeds, %d operations, %d clock stops, %d checks; edges taken:\n%s", len(files), ops, steps, checks, strings.Join(taken, "\n"))
}

// startFleet starts n managers on mock sharing "svc" through mem, each
// with Recover r, and stops them when the test ends.
func startFleet(t *testing.T, n int, mock *clock.Mock, mem *store.Memory, r fixedPeriods) ([]*manager.Manager, []*manager.Breaker) {
	t.Helper()
	var ms []*manager.Manager
	var bs []*manager.Breaker
	for range n {
		m := manager.Start(manager.Options{Clock: mock, Logger: sharedLogger, Resync: time.Hour})
		t.Cleanup(m.Stop)
		b, err := m.Register("svc", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: r, Store: mem})
		require.NoError(t, err)
		ms, bs = append(ms, m), append(bs, b)
	}
	syncFleet(ms)
	return ms, bs
}

// A manager that did not go through the open state itself (it joined a
// half-open fleet, or heard of an opening whose period was over) takes the
// probe lease for its Recover's probe time, not for a default: a probe that
// hangs holds the fleet for that time only.
func TestSharedJoinerLeaseIsItsProbeTime(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	r := fixedPeriods{open: time.Second, probe: time.Second}
	ms, bs := startFleet(t, 1, mock, mem, r)
	p, err := bs[0].Acquire(context.Background())
	require.NoError(t, err)
	p.Release(errSharedBoom)
	syncFleet(ms)
	mock.Add(time.Second)
	syncFleet(ms)

	// A replica joins the half-open fleet and probes.
	joined, bj := startFleet(t, 1, mock, mem, r)
	ms = append(ms, joined...)
	require.Equal(t, breaker.HalfOpen, bj[0].State())
	p, err = bj[0].Acquire(context.Background())
	require.NoError(t, err)
	require.True(t, p.Probe())
	syncFleet(ms)
	st, err := mem.Status(context.Background(), []string{"svc"})
	require.NoError(t, err)
	assert.Equal(t, r.probe, st[0].Probe, "the lease is the Recover's probe time")
	assert.Equal(t, mock.Now().Add(r.probe), bj[0].Snapshot().Until, "the probe's time is the Recover's")
}

// A manager whose probe's time (and lease) ran out is no longer the
// lease's holder, though its probe's permit is not released yet: refused
// by another manager's lease, it follows that lease, and the lease given
// back (an ignored probe) leaves it half-open, as the fleet is, instead of
// declining every call until that lease's end.
func TestSharedRanOutProberFollowsAnothersLease(t *testing.T) {
	mock := clock.NewMock()
	ms, bs := startFleet(t, 2, mock, store.NewMemory(mock), fixedPeriods{open: time.Second, probe: time.Second})
	p, err := bs[0].Acquire(context.Background())
	require.NoError(t, err)
	p.Release(errSharedBoom)
	syncFleet(ms)
	mock.Add(time.Second)
	syncFleet(ms)
	p0, err := bs[0].Acquire(context.Background())
	require.NoError(t, err)
	require.True(t, p0.Probe())
	syncFleet(ms)
	mock.Add(time.Second) // manager 0's lease runs out; its probe never answers
	syncFleet(ms)
	require.Equal(t, breaker.HalfOpen, bs[0].State())
	p1, err := bs[1].Acquire(context.Background())
	require.NoError(t, err)
	require.True(t, p1.Probe())
	syncFleet(ms)
	_, err = bs[0].Acquire(context.Background())
	require.ErrorIs(t, err, breaker.ErrOpen, "manager 1 holds the lease")
	syncFleet(ms)

	p1.ReleaseOutcome(classify.Ignore) // the lease is given back: the fleet is half-open
	syncFleet(ms)
	assert.Equal(t, breaker.HalfOpen, bs[1].State())
	assert.Equal(t, breaker.HalfOpen, bs[0].State(), "manager 0 follows the lease given back")
	p, err = bs[0].Acquire(context.Background())
	if assert.NoError(t, err, "manager 0's caller may probe") {
		assert.True(t, p.Probe())
	}
}

// convergedWith reports whether snapshot s (of view v) shows the fleet's
// state f at now.
func convergedWith(s *breaker.Snapshot, v *mgrView, f *fleetStore, now time.Time) bool {
	switch fleet := f.state(now); fleet {
	case breaker.Open:
		return s.State == breaker.Open && s.Forced == f.forced && (f.forced || s.Until.Equal(f.openTo))
	case breaker.Probing:
		return s.State == breaker.HalfOpen || s.State == breaker.Probing && s.Until.Equal(f.probeTo)
	default:
		return s.State == fleet && v.epoch == f.epoch
	}
}

// resolveThenSync is the memory store, with a hook run after each
// Resolve, before the manager that called it goes on: it makes an
// interleaving the manager's loop may make by itself.
type resolveThenSync struct {
	*store.Memory
	after func()
}

func (r *resolveThenSync) Resolve(ctx context.Context, name, token string, epoch uint64, o classify.Outcome, reopen time.Duration, why store.Reason) (store.Status, bool, error) {
	st, applied, err := r.Memory.Resolve(ctx, name, token, epoch, o, reopen, why)
	if r.after != nil {
		r.after()
	}
	return st, applied, err
}

// A probe's success or ignore is applied in the store before the breaker
// changes here, and the store delivers its change to this process's watch
// before Resolve returns. Even when the loop takes that change before the
// caller applies the verdict (here made certain by a Sync in between; the
// loop may do it by itself on a busy machine), the breaker moves by the
// probe's verdict (cause probe, with its outcome), and the probe's release
// is not stale.
func TestSharedProbeVerdictBeforeItsOwnChange(t *testing.T) {
	for _, tc := range []struct {
		outcome classify.Outcome
		to      breaker.State
	}{{classify.Success, breaker.Closed}, {classify.Ignore, breaker.HalfOpen}} {
		t.Run(tc.outcome.String(), func(t *testing.T) {
			pf := startHookedProber(t)
			m, b, hooked, ms, p := pf.m, pf.b, pf.hooked, pf.ms, pf.probe
			events, unsubscribe := m.Subscribe(16)
			defer unsubscribe()

			hooked.after = m.Sync
			p.ReleaseOutcome(tc.outcome)
			hooked.after = nil
			syncFleet(ms)
			require.Equal(t, tc.to, b.State())
			evs := drainEvents(events)
			require.NotEmpty(t, evs)
			last := evs[len(evs)-1]
			assert.Equal(t, breaker.Transition{From: breaker.Probing, To: tc.to}, last.Transition)
			assert.Equal(t, breaker.CauseProbe, last.Cause, "the probe's verdict moved the breaker")
			assert.Equal(t, tc.outcome, last.Outcome)
			assert.Zero(t, b.Stats().Stale, "the probe's release is not stale")
		})
	}
}

// hookedProber is a fleet of two managers on a memory store whose first,
// m, reaches the store through hooked and holds the probe's permit.
type hookedProber struct {
	m      *manager.Manager
	b      *manager.Breaker
	hooked *resolveThenSync
	ms     []*manager.Manager // both managers, the other first
	others []*manager.Breaker // the other manager's breaker
	probe  manager.Permit
}

// startHookedProber trips the fleet through m, lets the open period end
// and takes the probe on m.
func startHookedProber(t *testing.T) hookedProber {
	t.Helper()
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	pf := hookedProber{hooked: &resolveThenSync{Memory: mem}}
	pf.m = manager.Start(manager.Options{Clock: mock, Logger: sharedLogger, Resync: time.Hour})
	t.Cleanup(pf.m.Stop)
	var err error
	pf.b, err = pf.m.Register("svc", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: fixedPeriods{open: time.Second, probe: time.Second}, Store: pf.hooked})
	require.NoError(t, err)
	pf.ms, pf.others = startFleet(t, 1, mock, mem, fixedPeriods{open: time.Second, probe: time.Second})
	pf.ms = append(pf.ms, pf.m)

	p, err := pf.b.Acquire(context.Background())
	require.NoError(t, err)
	p.Release(errSharedBoom)
	syncFleet(pf.ms)
	mock.Add(time.Second)
	syncFleet(pf.ms)
	pf.probe, err = pf.b.Acquire(context.Background())
	require.NoError(t, err)
	require.True(t, pf.probe.Probe())
	syncFleet(pf.ms)
	return pf
}

// drainEvents returns the events already waiting in ch, without blocking.
func drainEvents(ch <-chan manager.Event) []manager.Event {
	var evs []manager.Event
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				return evs
			}
			evs = append(evs, e)
		default:
			return evs
		}
	}
}

// While a caller applies its probe's verdict, its manager's loop follows
// no store change of the breaker, so that the verdict's own change does not
// move it first. A change another manager makes in that window (here a
// ForceOpen, made certain to fall in it by the hook) waits for the verdict
// and is followed then, not dropped until the next resync.
func TestSharedChangeDuringAVerdictIsFollowed(t *testing.T) {
	pf := startHookedProber(t)
	m, b, hooked, ms, others, p := pf.m, pf.b, pf.hooked, pf.ms, pf.others, pf.probe

	hooked.after = func() {
		// The probe closed the fleet; another manager forces it open
		// before the prober has applied its verdict.
		require.NoError(t, others[0].ForceOpen())
		m.Sync()
	}
	p.Release(nil)
	hooked.after = nil
	syncFleet(ms)
	s := b.Snapshot()
	assert.Equal(t, breaker.Open, s.State, "the prober follows the forcing it heard of")
	assert.True(t, s.Forced)
}

package manager_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/fusebox-go/fusebox/breaker"
	fstep "github.com/fusebox-go/fusebox/internal/fleet"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/store"
)

// FuzzSharedModel decodes its input into a script over two to four
// managers (up to five with those that join during it) that share one
// breaker of Consecutive{Failures: k}, with a Quorum of 1 (none), 2 or 3,
// through one store.NewMemory on one
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
		// Each manager its own name: a quorum counts reporters by it.
		m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, Resync: hd.resync, Name: fmt.Sprintf("m%d", len(bs))})
		t.Cleanup(m.Stop)
		gate := &gatedWatch{Memory: mem}
		b, err := m.Register(name, manager.Config{
			Strategy: breaker.Consecutive{Failures: hd.k},
			Recover:  fixedPeriods{open: open, probe: probe},
			Store:    gate,
			Quorum:   hd.quorum,
		})
		if err != nil {
			t.Fatalf("Register on manager %d: %v", len(bs), err)
		}
		ms, bs, gates = append(ms, m), append(bs, b), append(gates, gate)
	}
	for i := range hd.n {
		start(hd.opens[i], hd.probes[i])
	}
	syncAll(ms)
	mod := newFleetModel(hd.k, hd.quorum, hd.opens, hd.probes, hd.resync, mock.Now())
	t0 := mock.Now()

	rep := sharedReport{edges: mod.edges}
	var held []sharedHeld
	var trace strings.Builder
	fmt.Fprintf(&trace, "%d managers, Consecutive{Failures: %d}, Quorum %d, open periods %v, probe times %v, resync %v\n", hd.n, hd.k, hd.quorum, hd.opens, hd.probes, hd.resync)
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
			if err == nil && p.Probe() && !mod.mgrs[mi].alone {
				// At the instant it is granted, no other probe of its
				// epoch is live (a breaker open alone probes on its
				// own, outside the fleet's epochs).
				for _, h := range held {
					if h.model.probe && !h.model.alone && h.model.epoch == mod.store.epoch && liveProbe(bs[h.model.mgr], h.model) {
						fatalf("manager %d got the probe while manager %d's probe (gen %d) of the same epoch %d is live", mi, h.model.mgr, h.model.gen, h.model.epoch)
					}
				}
			}
			fleetWas := mod.fleetName()
			mp := mod.acquire(mi)
			switch {
			case mp == nil:
				fmt.Fprintf(&trace, "        declined: %v\n", err)
			case mp.probe && mp.alone:
				fmt.Fprintf(&trace, "        the probe of a breaker open alone, gen %d\n", mp.gen)
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
				syncAll(ms)
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
		syncAll(ms)
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
	// its open period (and, but for the opener, its lag), or half-open if
	// that period is zero.
	if mod.tripped {
		mod.tripped = false
		d := mod.mgrs[mod.opener].open
		for i, b := range bs {
			if mod.mgrs[i].held || mod.mgrs[i].unsure {
				continue // it has not heard of the trip
			}
			until := mod.tripAt.Add(d)
			if i != mod.opener && d > 0 {
				until = until.Add(mod.lag(i))
			}
			s := b.Snapshot()
			if until.After(now) && (s.State != breaker.Open || !s.Until.Equal(until)) || !until.After(now) && s.State != breaker.HalfOpen {
				fatalf("manager %d tripped by manager %d at %s: %v until %s; want open until %s", i, mod.opener, untilString(mod.tripAt), s.State, untilString(s.Until), untilString(until))
			}
		}
	}

	// Every manager: its view, and the fleet's state.
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
		if v.alone {
			// Open alone, short of the quorum: its own cycle, until it
			// closes or the fleet moves to another epoch.
			continue
		}
		if v.held || v.unsure {
			// It has not heard of every change: it follows the fleet
			// again once it learnt what it missed.
			if !v.held && convergedWith(mod, i, s) {
				v.unsure = false
			}
			continue
		}
		if !followsFleet(mod, i, s) {
			fatalf("manager %d is %v until %s; the fleet is %s (open until %s, opened by %q; lease of manager %d until %s, the last until %s; its lag %v)",
				i, s.State, untilString(s.Until), mod.fleetName(), untilString(f.openTo), f.by, f.holder, untilString(f.probeTo), untilString(f.leaseEnd), mod.lag(i))
		}
	}

	// The probe: at most one live permit per epoch; one of the store's
	// epoch is the lease holder's, and one of an older epoch is live only
	// on a manager that has not heard of the newer one.
	live := map[uint64]int{}
	for _, h := range held {
		p := h.model
		if !p.probe || p.alone || !liveProbe(bs[p.mgr], p) {
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

// followsFleet reports whether snapshot s of manager i shows the fleet's
// state: open until the fleet's period's end (and its lag, unless it
// opened the epoch); the lease's holder probing until the lease's end, the
// others probing for it until then and their lag (within fleet.Tolerance:
// see fleet.Follow); half-open once both are
// over, or still waiting its lag; or probing a millisecond past a lease
// that was about to end when its caller was refused (fleetModel.acquire).
func followsFleet(mod *fleetModel, i int, s *breaker.Snapshot) bool {
	f, v, now := &mod.store, &mod.mgrs[i], mod.now
	probingFor := func(end time.Time) bool {
		// Within Tolerance: a mirror probing for one lease keeps its
		// deadline when another lease ends close to it.
		return s.State == breaker.Probing && s.Until.Sub(end.Add(mod.lag(i))).Abs() <= fstep.Tolerance
	}
	switch fleet := f.state(now); fleet {
	case breaker.Closed:
		return s.State == breaker.Closed
	case breaker.Open:
		return s.State == breaker.Open && s.Forced == f.forced && (f.forced || s.Until.Equal(mod.openUntil(i)))
	case breaker.Probing:
		if i == f.holder {
			return s.State == breaker.Probing
		}
		return probingFor(f.probeTo) || v.late && s.State == breaker.Probing
	default:
		lagging := s.State == breaker.Open && !s.Forced && s.Until.Equal(mod.openUntil(i)) && s.Until.After(now)
		// A lease given back is followed its lag after it was heard
		// of (by the change, or a read after it), or at the end taken
		// from it if sooner.
		given := !f.givenAt.IsZero() && s.State == breaker.Probing && !s.Until.After(now.Add(mod.lag(i)))
		return s.State == breaker.HalfOpen || lagging || !f.leaseEnd.IsZero() && probingFor(f.leaseEnd) || given || v.late && s.State == breaker.Probing
	}
}

// convergedWith reports whether snapshot s of manager i, which missed
// changes, shows the fleet's state again, in the fleet's epoch.
func convergedWith(mod *fleetModel, i int, s *breaker.Snapshot) bool {
	f, v := &mod.store, &mod.mgrs[i]
	switch f.state(mod.now) {
	case breaker.Open, breaker.Probing:
		return followsFleet(mod, i, s)
	default:
		return followsFleet(mod, i, s) && v.epoch == f.epoch
	}
}

package manager_test

import (
	"fmt"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/recover"
)

// This file holds fleetModel, the reference FuzzSharedModel compares a
// fleet of managers with: one breaker of Consecutive{Failures: k} shared
// by every manager through one store, on one clock, driven one operation
// at a time, each followed by a Sync of every manager. It is written from
// the contract (docs/shared-state.md, the methods' docs):
//
//   - the store holds the fleet's breaker: an epoch that every opening and
//     closing advances (odd while opened, even while closed), the shared
//     run of failures, the open period, the probe lease and its holder,
//     and the forcing;
//   - a failure in the closed state adds to the shared run; a success ends
//     it only if its manager reported a failure since its last reported
//     success; the failure that brings the run to k trips the fleet, and
//     the opener's Recover decides the open period for every manager;
//   - at the end of the open period one probe lease is granted, to the
//     first caller anywhere; another manager learns of it when its own
//     caller is refused, or at its next resync; the lease ends at its
//     time, by its verdict, or with its epoch;
//   - ForceOpen and Reset act on the store, for every manager, and a
//     verdict or an outcome decided before them changes nothing;
//   - every manager's breaker follows the store: after the syncs its state
//     is the fleet's (the probe's holder, and those that do not know of
//     the lease yet, excepted as said).
//
// Each manager's view is modelled to the generation (Snapshot.Gen counts
// its transitions), so that a transition too many or too few is caught.

// sharedProbeTime is every manager's probe time in the fuzz target. It is
// the manager's default lease too, the lease a manager takes when it has
// not asked its Recover yet (see TestSharedKnownBugDefaultLease): with the
// two equal, the model does not depend on which one a manager uses.
const sharedProbeTime = 10 * time.Second

// sharedFailureTTL is how long the memory store remembers a run of
// failures after the last one (store.DefaultFailureTTL).
const sharedFailureTTL = time.Minute

// fixedPeriods is a Recover with one open period and one probe time.
type fixedPeriods struct{ open, probe time.Duration }

func (fixedPeriods) Init() (any, error) { return nil, nil }

func (r fixedPeriods) Timeout(c recover.Context, state any) (time.Duration, any) {
	if c.Opening() {
		return r.open, state
	}
	return r.probe, state
}

// fleetStore is the store's side of the model: the fleet's breaker.
type fleetStore struct {
	epoch   uint64
	run     int64     // the shared run of consecutive failures
	runTo   time.Time // when the run is forgotten
	runBy   uint64    // bit i: manager i added to the run
	openTo  time.Time // the end of the open period
	holder  int       // the manager holding the probe lease, or -1
	probeTo time.Time // the end of the lease
	forced  bool
}

func (f *fleetStore) opened() bool { return f.epoch%2 == 1 }

// fleetState is the state the store describes at now, as a mirror would
// follow it.
func (f *fleetStore) state(now time.Time) breaker.State {
	switch {
	case !f.opened():
		return breaker.Closed
	case f.forced, f.openTo.After(now):
		return breaker.Open
	case f.holder >= 0 && f.probeTo.After(now):
		return breaker.Probing
	}
	return breaker.HalfOpen
}

// remaining is the store's Status durations at now.
func (f *fleetStore) remaining(now time.Time) (open, probe time.Duration) {
	if f.opened() && !f.forced && f.openTo.After(now) {
		open = f.openTo.Sub(now)
	}
	if f.holder >= 0 && f.probeTo.After(now) {
		probe = f.probeTo.Sub(now)
	}
	return open, probe
}

// mgrView is what the model expects of one manager's breaker.
type mgrView struct {
	state  breaker.State
	until  time.Time // Snapshot.Until: the end of an open period or of a probe's time
	forced bool
	gen    uint64
	// lease is the generation of the probing state whose lease this
	// manager took, while the manager keeps it (sharing.probe): zero when
	// none. It is kept after the lease ran out, until the probe's permit is
	// released or the epoch moves on.
	lease uint64
	// ghost: the manager follows a lease that was given back (a known
	// bug, see alt), until that lease's end.
	ghost bool
	// late: the manager follows a lease that ends within a millisecond
	// until a millisecond from when it was refused (see acquire).
	late     bool
	dirty    bool // a failure was reported since the last reported success
	resyncAt time.Time
	open     time.Duration // its Recover's open period
	// alt is the view the contract asks for where the manager, by a known
	// bug, does otherwise (see TestSharedKnownBugStaleHolder); either is
	// accepted, and the one the manager shows is kept.
	alt *mgrView
}

// fleetPermit is a permit the script holds, as the model sees it.
type fleetPermit struct {
	mgr     int
	gen     uint64
	probe   bool
	epoch   uint64 // the fleet's epoch it was granted in
	staleBy string // what ended its generation, once ended
}

// fleetModel is the reference model of one breaker shared by n managers.
type fleetModel struct {
	k      int64
	resync time.Duration
	now    time.Time
	store  fleetStore
	mgrs   []mgrView
	held   []*fleetPermit
	// probes counts the probe leases granted in each epoch.
	probes map[uint64]int
	// edges counts the protocol's edges the script took.
	edges map[string]int
	// tripped is set by a trip, until the check that every manager opened
	// until tripAt plus the opener's open period.
	tripped bool
	tripAt  time.Time
	opener  int
}

func newFleetModel(k int, opens []time.Duration, resync time.Duration, now time.Time) *fleetModel {
	m := &fleetModel{k: int64(k), resync: resync, now: now, probes: map[uint64]int{}, edges: map[string]int{}}
	m.store.holder = -1
	for _, o := range opens {
		m.mgrs = append(m.mgrs, mgrView{state: breaker.Closed, gen: 1, resyncAt: now.Add(resync), open: o})
	}
	m.edge(fmt.Sprintf("managers-%d", len(opens)))
	return m
}

func (m *fleetModel) edge(name string) { m.edges[name]++ }

// move takes manager i's view to st (with until and forced), a transition
// unless it is already there; its permits of the generation it leaves
// become stale by why.
func (m *fleetModel) move(i int, st breaker.State, until time.Time, forced bool, why string) {
	v := &m.mgrs[i]
	if st != breaker.Open && st != breaker.Probing || forced {
		until = time.Time{}
	}
	if v.state == st && v.forced == forced {
		v.until = until
		return
	}
	for _, p := range m.held {
		if p.mgr == i && p.gen == v.gen && p.staleBy == "" {
			p.staleBy = why
		}
	}
	v.state, v.until, v.forced, v.ghost, v.late = st, until, forced, false, false
	v.gen++
}

// newEpoch is what every manager does when the fleet moves to another
// epoch: the lease it kept goes.
func (m *fleetModel) newEpoch() {
	for i := range m.mgrs {
		m.mgrs[i].lease = 0
	}
}

// acquire is a caller's Acquire on manager i. It returns the permit, or
// nil for a declined call.
func (m *fleetModel) acquire(i int) *fleetPermit {
	v := &m.mgrs[i]
	switch v.state {
	case breaker.Closed:
		p := &fleetPermit{mgr: i, gen: v.gen, epoch: m.store.epoch}
		m.held = append(m.held, p)
		return p
	case breaker.Open, breaker.Probing:
		m.edge("declined")
		return nil
	}
	// Half-open: the caller takes the local probe slot and asks the store
	// for the lease.
	m.move(i, breaker.Probing, time.Time{}, false, "probe")
	f := &m.store
	switch f.state(m.now) {
	case breaker.HalfOpen:
		f.holder, f.probeTo = i, m.now.Add(sharedProbeTime)
		v.until, v.lease = f.probeTo, v.gen
		if m.probes[f.epoch]++; m.probes[f.epoch] > 1 {
			m.edge("probe-again-in-epoch")
		}
		m.edge("probe-granted")
		p := &fleetPermit{mgr: i, gen: v.gen, probe: true, epoch: f.epoch}
		m.held = append(m.held, p)
		return p
	case breaker.Probing:
		// Another manager holds the lease: declined, and following it,
		// for at least a millisecond (the manager's floor on the
		// refused probe's timer).
		v.until = f.probeTo
		if floor := m.now.Add(time.Millisecond); v.until.Before(floor) {
			v.until, v.late = floor, true
			m.edge("refused-lease-floor")
		}
		m.edge("probe-refused")
		return nil
	}
	panic(fmt.Sprintf("model: manager %d half-open while the fleet is %v", i, f.state(m.now)))
}

// release releases the held permit p with outcome o.
func (m *fleetModel) release(p *fleetPermit, o classify.Outcome) {
	for j, q := range m.held {
		if q == p {
			m.held = append(m.held[:j], m.held[j+1:]...)
			break
		}
	}
	v := &m.mgrs[p.mgr]
	if p.probe {
		m.releaseProbe(p, o)
		return
	}
	if v.state != breaker.Closed || v.gen != p.gen {
		m.edge("fenced-call-by-" + p.staleBy)
		return
	}
	if p.staleBy != "" {
		panic("model: a current permit is marked stale")
	}
	f := &m.store
	switch o {
	case classify.Failure:
		if !m.now.Before(f.runTo) {
			if f.run > 0 {
				m.edge("run-forgotten")
			}
			f.run, f.runBy = 0, 0
		}
		f.run++
		f.runBy |= 1 << p.mgr
		f.runTo = m.now.Add(sharedFailureTTL)
		v.dirty = true
		if f.run >= m.k {
			m.trip(p.mgr)
		}
	case classify.Success:
		if !v.dirty {
			if f.run > 0 {
				m.edge("unreported-success")
			}
			return
		}
		v.dirty = false
		if f.run > 0 {
			m.edge("run-ended")
		}
		f.run, f.runBy = 0, 0
	}
}

// trip opens the fleet: manager i's failure brought the run to k.
func (m *fleetModel) trip(i int) {
	f := &m.store
	m.edge("trip")
	if f.runBy&(f.runBy-1) != 0 {
		m.edge("trip-across-managers")
	}
	d := m.mgrs[i].open
	for j := range m.mgrs {
		if m.mgrs[j].open != d {
			m.edge("opener-decides")
			break
		}
	}
	f.epoch++
	f.openTo, f.holder, f.probeTo, f.forced = m.now.Add(d), -1, time.Time{}, false
	m.tripped, m.tripAt, m.opener = true, m.now, i
	m.newEpoch()
	// The opener trips, and the others follow the opening.
	m.move(i, breaker.Open, m.now.Add(d), false, "trip")
	if d == 0 {
		m.edge("trip-period-over")
		m.move(i, breaker.HalfOpen, time.Time{}, false, "timer")
	}
	for j := range m.mgrs {
		if j != i {
			m.follow(j, "trip")
		}
	}
}

// follow moves manager j to the fleet's state, as it does when it hears of
// a change that moved the fleet to a new epoch.
func (m *fleetModel) follow(j int, why string) {
	f := &m.store
	st := f.state(m.now)
	until := time.Time{}
	switch st {
	case breaker.Open:
		until = f.openTo
	case breaker.Probing:
		until = f.probeTo
	}
	m.move(j, st, until, f.forced, why)
}

// releaseProbe releases the probe permit p with outcome o.
func (m *fleetModel) releaseProbe(p *fleetPermit, o classify.Outcome) {
	v := &m.mgrs[p.mgr]
	if v.lease == p.gen {
		v.lease = 0
	}
	if v.state != breaker.Probing || v.gen != p.gen {
		m.edge("fenced-probe-by-" + p.staleBy)
		return
	}
	f := &m.store
	if f.holder != p.mgr || !f.probeTo.After(m.now) || f.epoch != p.epoch {
		panic(fmt.Sprintf("model: manager %d probing in gen %d without the fleet's lease", p.mgr, p.gen))
	}
	f.holder, f.probeTo = -1, time.Time{}
	switch o {
	case classify.Success:
		m.edge("probe-success")
		f.epoch++
		f.openTo, f.run, f.runBy = time.Time{}, 0, 0
		m.newEpoch()
		for j := range m.mgrs {
			m.move(j, breaker.Closed, time.Time{}, false, "verdict")
		}
	case classify.Ignore:
		m.edge("probe-ignored")
		m.move(p.mgr, breaker.HalfOpen, time.Time{}, false, "verdict")
		for j := range m.mgrs {
			w := &m.mgrs[j]
			if j == p.mgr || w.state != breaker.Probing {
				continue
			}
			if w.lease != 0 {
				// A manager that keeps a lease that ran out takes
				// itself for the holder and keeps following the lease
				// given back, until its end.
				m.withAlt(j, func() { m.move(j, breaker.HalfOpen, time.Time{}, false, "verdict") })
				m.mgrs[j].ghost = true
				m.edge("stale-holder")
				continue
			}
			m.move(j, breaker.HalfOpen, time.Time{}, false, "verdict")
		}
	case classify.Failure:
		m.edge("probe-failure")
		d := v.open
		f.epoch += 2
		f.openTo = m.now.Add(d)
		m.newEpoch()
		m.move(p.mgr, breaker.Open, f.openTo, false, "verdict")
		if d == 0 {
			m.edge("reopen-period-over")
			m.move(p.mgr, breaker.HalfOpen, time.Time{}, false, "timer")
		}
		for j := range m.mgrs {
			if j != p.mgr {
				m.follow(j, "verdict")
			}
		}
	}
}

// forceOpen is ForceOpen on manager i.
func (m *fleetModel) forceOpen(i int) {
	f := &m.store
	m.edge("force-from-" + m.fleetName())
	m.mgrs[i].lease = 0
	if f.forced && f.opened() {
		return
	}
	f.epoch += 1 + f.epoch%2
	f.openTo, f.holder, f.probeTo, f.forced = time.Time{}, -1, time.Time{}, true
	m.newEpoch()
	for j := range m.mgrs {
		m.move(j, breaker.Open, time.Time{}, true, "force")
	}
}

// reset is Reset on manager i.
func (m *fleetModel) reset(i int) {
	f := &m.store
	m.edge("reset-from-" + m.fleetName())
	for _, p := range m.held {
		if !p.probe && m.mgrs[p.mgr].state == breaker.Closed && p.gen == m.mgrs[p.mgr].gen {
			// A closed breaker's Reset clears the counts: the permits
			// granted before still count.
			m.edge("reset-keeps-permits")
			break
		}
	}
	f.epoch += 2 - f.epoch%2
	f.openTo, f.holder, f.probeTo, f.forced, f.run, f.runBy = time.Time{}, -1, time.Time{}, false, 0, 0
	m.newEpoch()
	for j := range m.mgrs {
		m.move(j, breaker.Closed, time.Time{}, false, "reset")
	}
}

// fleetName names the fleet's state for the edges.
func (m *fleetModel) fleetName() string {
	if m.store.forced && m.store.opened() {
		return "forced"
	}
	return m.store.state(m.now).String()
}

// next returns the earliest instant after now at which something happens
// in the model (a timer of a manager, a resync, the end of a period or of
// a lease in the store), or the zero time.
func (m *fleetModel) next() time.Time {
	var at time.Time
	consider := func(t time.Time) {
		if t.After(m.now) && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	for _, v := range m.mgrs {
		consider(v.resyncAt)
		if (v.state == breaker.Open || v.state == breaker.Probing) && !v.forced {
			consider(v.until)
		}
	}
	if m.store.opened() && !m.store.forced {
		consider(m.store.openTo)
	}
	if m.store.holder >= 0 {
		consider(m.store.probeTo)
	}
	return at
}

// nextDeadline is the earliest end of a period or of a lease, in the store
// or in a manager, after now, or the zero time.
func (m *fleetModel) nextDeadline() time.Time {
	var at time.Time
	consider := func(t time.Time) {
		if t.After(m.now) && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	for _, v := range m.mgrs {
		if (v.state == breaker.Open || v.state == breaker.Probing) && !v.forced {
			consider(v.until)
		}
	}
	return at
}

// advanceTo moves the model's clock to t, an instant no later than next():
// the timers due by then fire, and the managers whose resync is due read
// the store.
func (m *fleetModel) advanceTo(t time.Time) {
	m.now = t
	f := &m.store
	if f.holder >= 0 && !f.probeTo.After(t) {
		m.edge("lease-ran-out")
		f.holder, f.probeTo = -1, time.Time{}
	}
	for i := range m.mgrs {
		v := &m.mgrs[i]
		if (v.state == breaker.Open || v.state == breaker.Probing) && !v.forced && !v.until.After(t) {
			if v.state == breaker.Open {
				m.edge("open-period-ends")
			} else if v.lease == v.gen {
				m.edge("probe-time-ends")
			}
			m.move(i, breaker.HalfOpen, time.Time{}, false, "timer")
		}
	}
	for i := range m.mgrs {
		v := &m.mgrs[i]
		if v.resyncAt.After(t) {
			continue
		}
		v.resyncAt = t.Add(m.resync)
		if f.state(t) == breaker.HalfOpen && v.state == breaker.Probing && v.lease == 0 {
			// A manager following a lease given back (see ghost) learns
			// that it was, once it keeps no lease of its own.
			m.edge("ghost-ends-by-resync")
			m.move(i, breaker.HalfOpen, time.Time{}, false, "learn")
			continue
		}
		if f.state(t) != breaker.Probing || f.holder == i || v.state != breaker.HalfOpen {
			continue
		}
		// Another manager holds the lease: this one learns of it.
		if v.lease != 0 {
			// It keeps a lease of its own that ran out, and takes itself
			// for the holder: it does not follow the lease.
			m.withAlt(i, func() { m.move(i, breaker.Probing, f.probeTo, false, "learn") })
			m.edge("stale-holder")
			continue
		}
		m.edge("lease-learnt-by-resync")
		m.move(i, breaker.Probing, f.probeTo, false, "learn")
	}
}

// withAlt records as manager i's alternative view the one f makes, and
// keeps its view as it is: the manager does not do what the contract asks
// (f) there, by a known bug, and either is accepted until it is fixed.
func (m *fleetModel) withAlt(i int, f func()) {
	kept := m.mgrs[i]
	kept.alt = nil
	m.mgrs[i] = kept
	f()
	good := m.mgrs[i]
	good.alt, good.lease = nil, 0
	m.mgrs[i] = kept
	m.mgrs[i].alt = &good
}

// forget drops the held permit p: the script will not release it.
func (m *fleetModel) forget(p *fleetPermit) {
	for j, q := range m.held {
		if q == p {
			m.held = append(m.held[:j], m.held[j+1:]...)
			return
		}
	}
}

package manager_test

import (
	"fmt"
	"sort"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	fstep "github.com/fusebox-go/fusebox/internal/fleet"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

// This file holds fleetModel, the reference FuzzSharedModel compares a
// fleet of managers with: one breaker of Consecutive{Failures: k}, with a
// quorum q, shared by every manager through one store, on one clock,
// driven one operation at a time, each followed by a Sync of every
// manager. It is written from the contract (docs/shared-state.md, the
// methods' docs):
//
//   - the store holds the fleet's breaker: an epoch that every opening and
//     closing advances (odd while opened, even while closed), the shared
//     run of failures, the open period, the probe lease and its holder,
//     and the forcing;
//   - a failure in the closed state adds to the shared run; a success ends
//     it only if its manager reported a failure since its last reported
//     success; the failure that brings the run to k trips the fleet, and
//     the opener's Recover decides the open period for every manager;
//   - under a quorum q above 1, the run trips the fleet only if it still
//     reaches k without the failures of the q-1 managers that reported
//     the most of it; a manager whose own failures in a row reach k while
//     the fleet's are short of the quorum opens alone: it runs its own
//     open periods and probes, tells the store nothing, and follows
//     nothing of the fleet's closed epoch, until it closes or the fleet
//     moves to another epoch;
//   - at the end of the open period one probe lease is granted, to the
//     first caller anywhere; the store announces it, and another manager
//     learns of it so (or, its watch held, when its own caller is refused,
//     or at its next resync); the lease ends at its time, by its verdict,
//     or with its epoch;
//   - a manager acts on the end of another's open period, and of a lease,
//     its lag later (fleet.Lag of its name), so that the opener, which
//     acts at once, asks first and the others hear of its lease;
//   - ForceOpen and Reset act on the store, for every manager, and a
//     verdict or an outcome decided before them changes nothing;
//   - every manager's breaker follows the store: after the syncs its state
//     is the fleet's (the probe's holder, and those that do not know of
//     the lease yet, excepted as said), unless its watch is held or lost
//     changes; then it learns from its own store calls and its resync.
//
// Each manager's view is modelled to the generation (Snapshot.Gen counts
// its transitions), so that a transition too many or too few is caught.
// What a view does with a status or a change it hears of is decided by the
// breaker's real step (package fleet's Step, tested by its own tables), fed what the
// model's store says.

// sharedProbeTime is the longest probe time in the fuzz target.
const sharedProbeTime = 10 * time.Second

// sharedFailureTTL is how long the memory store remembers a run of
// failures after the last one (store.DefaultFailureTTL).
const sharedFailureTTL = time.Minute

// fixedPeriods is a Recover with one open period and one probe time.
type fixedPeriods struct{ open, probe time.Duration }

func (fixedPeriods) Init() (any, error) { return nil, nil }

func (r fixedPeriods) Timeout(c recover.Context, state any) (time.Duration, any) {
	if c.Transition.To == breaker.Open {
		return r.open, state
	}
	return r.probe, state
}

// fleetStore is the store's side of the model: the fleet's breaker.
type fleetStore struct {
	epoch     uint64
	run       int64                    // the shared run of consecutive failures
	runTo     time.Time                // when the run is forgotten
	runBy     uint64                   // bit i: manager i added to the run
	shares    [sharedMaxManagers]int64 // the run's failures, by manager
	openTo    time.Time                // the end of the open period
	holder    int                      // the manager holding the probe lease, or -1
	holderGen uint64                   // the generation of the holder's probing state
	probeTo   time.Time                // the end of the lease
	forced    bool
	by        string    // who opened the opened epoch (store.Reason.By)
	leaseEnd  time.Time // the end of the epoch's last lease, kept once it ran out
	givenAt   time.Time // when the epoch's last lease was given back (an ignored probe), if it was
}

func (f *fleetStore) opened() bool { return f.epoch%2 == 1 }

// endRun ends the shared run of failures, and its reporters' shares.
func (f *fleetStore) endRun() {
	f.run, f.runBy, f.shares = 0, 0, [sharedMaxManagers]int64{}
}

// trips reports whether the run trips the fleet under quorum q: k
// failures or more without the q-1 largest shares.
func (f *fleetStore) trips(k int64, q int) bool {
	shares := append([]int64(nil), f.shares[:]...)
	sort.Slice(shares, func(a, b int) bool { return shares[a] > shares[b] })
	run := f.run
	for _, n := range shares[:q-1] {
		run -= n
	}
	return run >= k
}

// state is the state the store describes at now, as a mirror would follow
// it.
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

// status is the store's Status at now.
func (f *fleetStore) status(now time.Time) store.Status {
	open, probe := f.remaining(now)
	st := store.Status{Epoch: f.epoch, Open: open, Probe: probe, Forced: f.forced && f.opened()}
	if f.opened() && !f.forced {
		st.Reason.By = f.by
	}
	return st
}

// mgrView is what the model expects of one manager's breaker.
type mgrView struct {
	name   string // its manager's Options.Name
	state  breaker.State
	until  time.Time // Snapshot.Until: the end of an open period or of a probe's time
	forced bool
	gen    uint64
	epoch  uint64 // the store's epoch its state follows
	// lease is the generation of the probing state whose lease this
	// manager took, while the manager keeps it (sharing.probe): zero when
	// none. It is kept after the lease ran out, until the probe's permit is
	// released or the epoch moves on.
	lease uint64
	// late: the manager follows a lease until a millisecond from when its
	// caller was refused, after the lease's end (see acquire).
	late  bool
	dirty bool // a failure was reported since the last reported success
	// own is the manager's own count of failures in a row, in its closed
	// generation ownGen (its machine's counter, which a quorum's lone
	// opening trips on); alone: it opened alone, short of the quorum.
	own      int64
	ownGen   uint64
	alone    bool
	dirtyIn  uint64 // the newest store epoch such a failure was counted in
	resyncAt time.Time
	open     time.Duration // its Recover's open period
	probe    time.Duration // its Recover's probe time: its lease
	// held: its watch holds the changes (queue) the store delivers;
	// unsure: it lost changes, and may not follow the fleet until its
	// next resync.
	held, unsure bool
	queue        []store.Change
	// alt is another view the manager may show, where it may apply two
	// results in either order. Either is accepted, and the one the manager
	// shows is kept.
	alt *mgrView
}

// fleetPermit is a permit the script holds, as the model sees it.
type fleetPermit struct {
	mgr     int
	gen     uint64
	probe   bool
	epoch   uint64 // the manager's epoch it was granted in
	alone   bool   // a probe of a breaker open alone: no lease
	staleBy string // what ended its generation, once ended
}

// fleetModel is the reference model of one breaker shared by n managers.
type fleetModel struct {
	k      int64
	quorum int
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

func newFleetModel(k, quorum int, opens, probes []time.Duration, resync time.Duration, now time.Time) *fleetModel {
	m := &fleetModel{k: int64(k), quorum: quorum, resync: resync, now: now, probes: map[uint64]int{}, edges: map[string]int{}}
	m.store.holder = -1
	for i, o := range opens {
		m.mgrs = append(m.mgrs, mgrView{name: mgrName(i), state: breaker.Closed, gen: 1, resyncAt: now.Add(resync), open: o, probe: probes[i]})
	}
	m.edge(fmt.Sprintf("managers-%d", len(opens)))
	return m
}

func (m *fleetModel) edge(name string) { m.edges[name]++ }

// mgrName is manager i's Options.Name.
func mgrName(i int) string { return fmt.Sprintf("m%d", i) }

// lag is manager i's lag (fleet.Lag).
func (m *fleetModel) lag(i int) time.Duration { return fstep.Lag(m.mgrs[i].name) }

// openUntil is when manager i's view of the fleet's open period ends: the
// store's end, and its lag unless it opened the epoch.
func (m *fleetModel) openUntil(i int) time.Time {
	if m.mgrs[i].name == m.store.by {
		return m.store.openTo
	}
	return m.store.openTo.Add(m.lag(i))
}

// moveView takes v to st (with until and forced), a transition unless it
// is there already, and reports whether it was one.
func moveView(v *mgrView, st breaker.State, until time.Time, forced bool) bool {
	if st != breaker.Open && st != breaker.Probing || forced {
		until = time.Time{}
	}
	if v.state == st && v.forced == forced {
		v.until = until
		return false
	}
	v.state, v.until, v.forced, v.late = st, until, forced, false
	v.gen++
	return true
}

// move takes manager i's view (and its alternative) to st; its permits of
// the generation it leaves become stale by why.
func (m *fleetModel) move(i int, st breaker.State, until time.Time, forced bool, why string) {
	v := &m.mgrs[i]
	old := v.gen
	if moveView(v, st, until, forced) {
		m.staled(i, old, why)
	}
	if v.alt != nil {
		moveView(v.alt, st, until, forced)
	}
}

// staled marks manager i's permits of generation gen stale by why.
func (m *fleetModel) staled(i int, gen uint64, why string) {
	for _, p := range m.held {
		if p.mgr == i && p.gen == gen && p.staleBy == "" {
			p.staleBy = why
		}
	}
}

// followView is what the manager does with status st of the store, asked
// for (or heard of) at at: the breaker's real step (fleet.Step), fed the
// status as the manager feeds it, on a state and a view made of the
// model's. The mirror holds the lease while its probe is its current
// state: not once the probe's time ran out, though it keeps the lease
// until the probe's permit is released.
func followView(v *mgrView, st store.Status, at, now time.Time) {
	s := fstep.State{Epoch: v.epoch, Policy: store.Policy{Reporter: v.name}}
	if v.alone {
		s.Trip = fstep.OwnTrip{Kind: fstep.TripAlone, Gen: v.gen}
	}
	if v.lease != 0 {
		s.Probe = fstep.Probe{Kind: fstep.ProbeHeld, Lease: fstep.Lease{Gen: v.lease, Epoch: v.epoch}}
	}
	view := fstep.View{State: v.state, Gen: v.gen, Until: v.until, Forced: v.forced}
	next, a := fstep.Step(s, view, now, fstep.Heard{Status: st, At: at})
	v.epoch, v.alone = next.Epoch, next.Trip.Kind == fstep.TripAlone
	if next.Probe.Kind != fstep.ProbeHeld {
		v.lease = 0
	}
	switch c := a.Change.(type) {
	case fstep.Move:
		moveView(v, c.State, c.Until, c.Forced)
	case fstep.Renew:
		if v.ownGen == c.Gen {
			v.own = 0 // a fresh counter
		}
	}
	for _, e := range a.Loop {
		if x, ok := e.(fstep.Extend); ok && (v.state == breaker.Open || v.state == breaker.Probing) {
			// The loop corrects an open period's end, or a lease's,
			// wherever the step decided it.
			v.until = x.Until
		}
	}
}

// follow is followView on manager i's view (and its alternative), by why
// ("resync", "deliver", "reply", or what made the change).
func (m *fleetModel) follow(i int, st store.Status, at time.Time, why string) {
	v := &m.mgrs[i]
	before := *v
	var alt *mgrView
	if v.alt != nil {
		a := *v.alt
		followView(&a, st, at, m.now)
		alt = &a
	}
	got := before
	got.alt = nil
	followView(&got, st, at, m.now)
	if before.lease != 0 && before.lease != before.gen && got.state != before.state {
		// Its probe's time ran out, and it follows the fleet all the
		// same, though it keeps the lease it had.
		m.edge("ran-out-prober-follows")
	}
	if got.gen != before.gen {
		m.staled(i, before.gen, why)
	}
	got.alt = alt
	*v = got

	switch {
	case before.alone && !got.alone:
		m.edge("alone-follows-fleet")
	case why == "deliver" && st.Epoch < before.epoch:
		m.edge("late-echo-ignored")
	case why == "resync" && st.Epoch > before.epoch && !st.Opened():
		m.edge("missed-close-learnt-by-resync")
	case why == "resync" && st.Epoch > before.epoch:
		m.edge("missed-opening-learnt-by-resync")
	case why == "resync" && before.state == breaker.HalfOpen && got.state == breaker.Probing:
		m.edge("lease-learnt-by-resync")
	case why == "resync" && before.state == breaker.Probing && (got.state == breaker.HalfOpen || got.state == breaker.Probing && got.until.Before(before.until)):
		// Half-open, or its lag after the read (a lease given back).
		m.edge("lost-lease-learnt-by-resync")
	case why == "reply" && st.Epoch > before.epoch:
		m.edge("missed-change-learnt-by-reply")
	}
}

// publish hands change c, made at now, to every manager's watch: a held
// one queues it, the others follow it.
func (m *fleetModel) publish(c store.Change, why string) {
	for i := range m.mgrs {
		v := &m.mgrs[i]
		if v.held {
			v.queue = append(v.queue, c)
			continue
		}
		m.follow(i, fstep.StatusOf(c), m.now, why)
	}
}

// raise moves manager i's epoch up to e, as its own store calls' replies
// do; a newer epoch ends the lease it kept.
func (m *fleetModel) raise(i int, e uint64) {
	for _, v := range []*mgrView{&m.mgrs[i], m.mgrs[i].alt} {
		if v != nil && e > v.epoch {
			v.epoch, v.lease, v.alone = e, 0, false
		}
	}
}

// acquire is a caller's Acquire on manager i. It returns the permit, or
// nil for a declined call.
func (m *fleetModel) acquire(i int) *fleetPermit {
	v := &m.mgrs[i]
	f := &m.store
	switch v.state {
	case breaker.Closed:
		if f.opened() {
			m.edge("admitted-unaware")
		}
		p := &fleetPermit{mgr: i, gen: v.gen, epoch: v.epoch}
		m.held = append(m.held, p)
		return p
	case breaker.Open, breaker.Probing:
		m.edge("declined")
		return nil
	}
	if v.alone {
		// Open alone: the probe is this manager's, for its probe time,
		// and the store hears nothing of it.
		m.edge("probe-alone")
		m.move(i, breaker.Probing, m.now.Add(v.probe), false, "probe")
		p := &fleetPermit{mgr: i, gen: v.gen, probe: true, alone: true, epoch: v.epoch}
		m.held = append(m.held, p)
		return p
	}
	// Half-open: the caller takes the local probe slot and asks the store
	// for the lease of the manager's epoch.
	m.move(i, breaker.Probing, time.Time{}, false, "probe")
	if v.epoch > f.epoch {
		panic(fmt.Sprintf("model: manager %d in epoch %d, above the store's %d", i, v.epoch, f.epoch))
	}
	if v.epoch == f.epoch && f.state(m.now) == breaker.HalfOpen {
		f.holder, f.holderGen, f.probeTo = i, v.gen, m.now.Add(v.probe)
		f.leaseEnd, f.givenAt = f.probeTo, time.Time{}
		v.until, v.lease = f.probeTo, v.gen
		if v.alt != nil {
			v.alt.until, v.alt.lease = f.probeTo, v.gen
		}
		if m.probes[f.epoch]++; m.probes[f.epoch] > 1 {
			m.edge("probe-again-in-epoch")
		}
		m.edge("probe-granted")
		p := &fleetPermit{mgr: i, gen: v.gen, probe: true, epoch: v.epoch}
		m.held = append(m.held, p)
		// The store announces the lease: the others probe for it.
		m.publish(store.Change{Kind: store.Leased, Epoch: f.epoch, Probe: v.probe}, "lease")
		return p
	}
	// Refused: declined, and following what the store says: the lease
	// another holds, until its end and the manager's lag, or for a
	// millisecond (the manager's floor on the refused probe's timer).
	m.edge("probe-refused")
	_, probe := f.remaining(m.now)
	if probe > 0 {
		v.until = f.probeTo.Add(m.lag(i))
	} else {
		v.until, v.late = m.now.Add(time.Millisecond), true
	}
	if v.alt != nil {
		v.alt.until, v.alt.late = v.until, v.late
	}
	m.follow(i, f.status(m.now), m.now, "reply")
	return nil
}

// release releases the held permit p with outcome o.
func (m *fleetModel) release(p *fleetPermit, o classify.Outcome) {
	m.forget(p)
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
			f.endRun()
		}
		f.run++
		f.runBy |= 1 << p.mgr
		f.shares[p.mgr]++
		if v.ownGen != p.gen {
			v.own, v.ownGen = 0, p.gen
		}
		v.own++
		f.runTo = m.now.Add(sharedFailureTTL)
		v.dirty, v.dirtyIn = true, max(v.dirtyIn, f.epoch)
		switch {
		case f.opened():
			// The fleet is open already: the reply says so.
			m.edge("failure-while-fleet-open")
			m.follow(p.mgr, f.status(m.now), m.now, "reply")
		case f.trips(m.k, m.quorum):
			m.raise(p.mgr, f.epoch)
			m.trip(p.mgr)
		case m.quorum > 1 && v.own >= m.k:
			m.tripAlone(p.mgr)
		case f.run >= m.k:
			m.edge("quorum-short")
		}
	case classify.Success:
		if v.ownGen == p.gen {
			v.own = 0
		}
		if v.dirty && v.epoch%2 == 0 && v.epoch > v.dirtyIn {
			// The rule of the fleet's run: a run belongs to its closed
			// epoch, and a closing or a reset deletes it. A manager
			// that knows of a closing after its failures has nothing of
			// its own in the run that counts now, like a manager that
			// never failed: its success ends nothing, and reports
			// nothing.
			v.dirty = false
			if f.run > 0 {
				m.edge("run-deleted-by-closing")
			}
			return
		}
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
		f.endRun()
	}
}

// tripAlone opens manager i alone: its own failures in a row reached k,
// the fleet's run is short of the quorum. The store hears nothing of it.
func (m *fleetModel) tripAlone(i int) {
	m.edge("trip-alone")
	v := &m.mgrs[i]
	m.move(i, breaker.Open, m.now.Add(v.open), false, "trip")
	v.alone = true
	if v.alt != nil {
		v.alt.alone = true
	}
	if v.open == 0 {
		m.move(i, breaker.HalfOpen, time.Time{}, false, "timer")
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
	m.tripped, m.tripAt, m.opener = true, m.now, i
	// The opener trips here, then opens the store in the closed epoch
	// the trip was counted in, and follows its new epoch.
	m.move(i, breaker.Open, m.now.Add(d), false, "trip")
	if d == 0 {
		m.edge("trip-period-over")
		m.move(i, breaker.HalfOpen, time.Time{}, false, "timer")
	}
	f.epoch++
	f.openTo, f.holder, f.probeTo, f.forced, f.by, f.leaseEnd, f.givenAt = m.now.Add(d), -1, time.Time{}, false, m.mgrs[i].name, time.Time{}, time.Time{}
	m.raise(i, f.epoch)
	m.publish(store.Change{Kind: store.Opened, Epoch: f.epoch, Open: d, Reason: store.Reason{By: f.by}}, "trip")
}

// releaseProbe releases the probe permit p with outcome o.
func (m *fleetModel) releaseProbe(p *fleetPermit, o classify.Outcome) {
	i := p.mgr
	v := &m.mgrs[i]
	if p.alone {
		m.releaseAlone(p, o)
		return
	}
	kept := v.lease == p.gen
	if kept {
		v.lease = 0
		if v.alt != nil {
			v.alt.lease = 0
		}
	}
	current := v.state == breaker.Probing && v.gen == p.gen
	if !current {
		m.edge("fenced-probe-by-" + p.staleBy)
		if kept {
			// The manager still sends the verdict of the lease it
			// kept, a failure as an ignore (the open period it would
			// set was never decided); the store refuses it (the lease
			// ran out), and the manager follows the store's answer:
			// another process's lease, say.
			m.edge("late-verdict-refused")
			m.follow(i, m.store.status(m.now), m.now, "reply")
		}
		return
	}
	if !kept {
		panic(fmt.Sprintf("model: manager %d probes in gen %d without its lease", i, p.gen))
	}
	f := &m.store
	valid := f.holder == i && f.holderGen == p.gen && f.probeTo.After(m.now) && f.epoch == p.epoch
	switch {
	case o == classify.Failure:
		// The breaker opens here for its Recover's period; the manager
		// then sends the verdict, with that period.
		d := v.open
		m.edge("probe-failure")
		m.move(i, breaker.Open, m.now.Add(d), false, "verdict")
		if !valid {
			m.edge("verdict-fenced-in-store")
			st := f.status(m.now)
			if d == 0 {
				// The store's answer may come before the timer of the
				// period of zero, or after.
				before := m.mgrs[i]
				before.alt = nil
				m.move(i, breaker.HalfOpen, time.Time{}, false, "timer")
				m.follow(i, st, m.now, "reply")
				other := before
				followView(&other, st, m.now, m.now)
				if other.state == breaker.Open && other.gen == before.gen {
					moveView(&other, breaker.HalfOpen, time.Time{}, false)
				}
				if w := &m.mgrs[i]; w.alt == nil && (other.state != w.state || other.gen != w.gen || other.forced != w.forced) {
					w.alt = &other
				}
				return
			}
			m.follow(i, st, m.now, "reply")
			return
		}
		if d == 0 {
			m.edge("reopen-period-over")
			m.move(i, breaker.HalfOpen, time.Time{}, false, "timer")
		}
		f.epoch += 2
		f.openTo, f.holder, f.probeTo, f.by, f.leaseEnd, f.givenAt = m.now.Add(d), -1, time.Time{}, v.name, time.Time{}, time.Time{}
		m.raise(i, f.epoch)
		m.publish(store.Change{Kind: store.Opened, Epoch: f.epoch, Open: d, Reason: store.Reason{By: f.by}}, "verdict")
	case !valid:
		// The store refuses the verdict: it is applied here as an ignored
		// probe, and the breaker follows what the store says.
		m.edge("verdict-fenced-in-store")
		m.move(i, breaker.HalfOpen, time.Time{}, false, "verdict")
		m.follow(i, f.status(m.now), m.now, "reply")
	case o == classify.Success:
		m.edge("probe-success")
		f.epoch++
		f.openTo, f.holder, f.probeTo, f.leaseEnd, f.givenAt = time.Time{}, -1, time.Time{}, time.Time{}, time.Time{}
		f.endRun()
		m.raise(i, f.epoch)
		m.move(i, breaker.Closed, time.Time{}, false, "verdict")
		m.publish(store.Change{Kind: store.Closed, Epoch: f.epoch}, "verdict")
	default:
		m.edge("probe-ignored")
		f.holder, f.probeTo, f.givenAt = -1, time.Time{}, m.now
		m.move(i, breaker.HalfOpen, time.Time{}, false, "verdict")
		m.publish(store.Change{Kind: store.Released, Epoch: f.epoch}, "verdict")
	}
}

// releaseAlone releases the probe of a breaker open alone: it closes,
// opens again for its own period, or is half-open again, here only.
func (m *fleetModel) releaseAlone(p *fleetPermit, o classify.Outcome) {
	i := p.mgr
	v := &m.mgrs[i]
	if v.state != breaker.Probing || v.gen != p.gen {
		m.edge("fenced-probe-by-" + p.staleBy)
		return
	}
	switch o {
	case classify.Success:
		m.edge("alone-closes")
		m.move(i, breaker.Closed, time.Time{}, false, "verdict")
		v.alone = false
	case classify.Failure:
		m.edge("alone-reopens")
		m.move(i, breaker.Open, m.now.Add(v.open), false, "verdict")
		if v.open == 0 {
			m.move(i, breaker.HalfOpen, time.Time{}, false, "timer")
		}
	default:
		m.move(i, breaker.HalfOpen, time.Time{}, false, "verdict")
	}
	if v.alt != nil {
		v.alt.alone = v.alone
	}
}

// forceOpen is ForceOpen on manager i.
func (m *fleetModel) forceOpen(i int) {
	f := &m.store
	m.edge("force-from-" + m.fleetName())
	v := &m.mgrs[i]
	v.lease = 0
	if !(f.forced && f.opened()) {
		f.epoch += 1 + f.epoch%2
		f.openTo, f.holder, f.probeTo, f.forced, f.leaseEnd, f.givenAt = time.Time{}, -1, time.Time{}, true, time.Time{}, time.Time{}
		defer m.publish(store.Change{Kind: store.Forced, Epoch: f.epoch}, "force")
	}
	m.raise(i, f.epoch)
	m.move(i, breaker.Open, time.Time{}, true, "force")
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
	f.openTo, f.holder, f.probeTo, f.forced, f.leaseEnd, f.givenAt = time.Time{}, -1, time.Time{}, false, time.Time{}, time.Time{}
	f.endRun()
	m.mgrs[i].lease = 0
	if v := &m.mgrs[i]; v.state == breaker.Closed && v.ownGen == v.gen {
		v.own = 0 // a closed breaker's Reset gives it a fresh counter
	}
	m.raise(i, f.epoch)
	m.move(i, breaker.Closed, time.Time{}, false, "reset")
	m.publish(store.Change{Kind: store.Reset, Epoch: f.epoch}, "reset")
}

// join adds a manager, with open period open and probe time probe, that
// registers the breaker now: it follows the store's status from the start.
func (m *fleetModel) join(open, probe time.Duration) {
	m.edge("join-" + m.fleetName())
	m.mgrs = append(m.mgrs, mgrView{name: mgrName(len(m.mgrs)), state: breaker.Closed, gen: 1, resyncAt: m.now.Add(m.resync), open: open, probe: probe})
	m.follow(len(m.mgrs)-1, m.store.status(m.now), m.now, "join")
	m.edge(fmt.Sprintf("managers-%d", len(m.mgrs)))
}

// hold makes manager i's watch hold the changes it hears of.
func (m *fleetModel) hold(i int) {
	m.edge("watch-held")
	m.mgrs[i].held, m.mgrs[i].unsure = true, true
}

// deliver hands manager i the changes its watch held, in order, now.
func (m *fleetModel) deliver(i int) {
	v := &m.mgrs[i]
	q := v.queue
	v.queue, v.held = nil, false
	if len(q) > 0 {
		m.edge("changes-delivered-late")
	}
	for _, c := range q {
		m.follow(i, fstep.StatusOf(c), m.now, "deliver")
	}
}

// drop loses the changes manager i's watch held.
func (m *fleetModel) drop(i int) {
	v := &m.mgrs[i]
	if len(v.queue) > 0 {
		m.edge("changes-lost")
		v.unsure = true
	}
	v.queue, v.held = nil, false
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

// nextDeadline is the earliest end of a period or of a lease in a manager
// after now, or the zero time.
func (m *fleetModel) nextDeadline() time.Time {
	var at time.Time
	for _, v := range m.mgrs {
		if (v.state == breaker.Open || v.state == breaker.Probing) && !v.forced && v.until.After(m.now) && (at.IsZero() || v.until.Before(at)) {
			at = v.until
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
			switch {
			case v.state == breaker.Open:
				m.edge("open-period-ends")
			case v.lease == v.gen:
				m.edge("probe-time-ends")
			}
			m.move(i, breaker.HalfOpen, time.Time{}, false, "timer")
		}
		if a := v.alt; a != nil && (a.state == breaker.Open || a.state == breaker.Probing) && !a.forced && !a.until.After(t) {
			moveView(a, breaker.HalfOpen, time.Time{}, false)
		}
	}
	for i := range m.mgrs {
		v := &m.mgrs[i]
		if v.resyncAt.After(t) {
			continue
		}
		v.resyncAt = t.Add(m.resync)
		m.follow(i, f.status(t), t, "resync")
	}
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

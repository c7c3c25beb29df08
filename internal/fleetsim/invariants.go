package fleetsim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/reasontext"
	"github.com/fusebox-go/fusebox/store"
)

// This file holds the promises of the fleet protocol as invariants, one
// function each, and what they need to know of the run. Every function
// runs with the world's lock held: those of the store after each of its
// operations, those of trial calls as each starts and ends, the others
// at each checkpoint.

// The invariants' names, as a failure says them.
const (
	InvOneTrial            = "one-trial-at-a-time"
	InvTrialInLease        = "trial-within-its-lease"
	InvForcingStands       = "forcing-stands-until-reset"
	InvForcingReachesStore = "forcing-reaches-the-store"
	InvQuorum              = "quorum-opens-as-the-rule-allows"
	InvNamesOpener         = "every-process-names-the-opener"
	InvResetEndsRamp       = "reset-ends-every-ramp"
	InvRampEarned          = "a-ramp-follows-a-recovery"
	InvGivenBackCostsOne   = "a-given-back-lease-costs-one-request"
	InvOpensInTime         = "opens-within-a-bound"
	InvClosesInTime        = "closes-within-a-bound"
)

// Bounds of the invariants that wait.
const (
	// settle is how long after a fault the liveness invariants wait:
	// a store deadline, a resync, and the watch's retry.
	settle = 2 * time.Second
	// clean is how long a process's link must have been free of faults
	// for the invariants of what it follows to hold of it.
	clean = 2 * time.Second
	// openBound is how long after a process is told that the fleet's
	// count crossed its threshold the store must be open.
	openBound = 1500 * time.Millisecond
	// closeBound is how long after the service heals (and faults end)
	// the store must be closed; every process, procBound after that.
	closeBound = 3 * time.Second
	procBound  = time.Second
	// heard is how long after the store's epoch changed a process with a
	// clean link (for clean/2) has heard of it: a change's delivery, or
	// a resync.
	heard = Resync + 100*time.Millisecond
	// rampSlack is how far a process's slow start may begin from the
	// store's: the delays of the change or the read that told it.
	rampSlack = 50 * time.Millisecond
)

// Violation is an invariant a run broke.
type Violation struct {
	Invariant string
	Seed      uint64
	At        time.Duration
	Detail    string
	// Before is the end of the log up to the violation.
	Before []Entry
}

// Error returns the invariant, the seed, the instant, what broke, and the
// events that led to it.
func (v *Violation) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invariant %s broken, seed %d, at %v: %s\nthe events before it:\n", v.Invariant, v.Seed, v.At, v.Detail)
	for _, e := range v.Before {
		fmt.Fprintf(&b, "  %v\n", e)
	}
	return b.String()
}

// violate records the first violation of the run.
func (w *world) violate(inv, format string, args ...any) {
	if w.violation != nil || slices.Contains(w.plan.Unchecked, inv) {
		return
	}
	detail := fmt.Sprintf(format, args...)
	if w.replace != nil {
		detail = w.replace.Replace(detail)
	}
	w.logf("VIOLATION %s: %s", inv, detail)
	tail := w.log[max(0, len(w.log)-40):]
	w.violation = &Violation{Invariant: inv, Seed: w.plan.Seed, At: w.now(), Detail: detail, Before: slices.Clone(tail)}
}

// oracle is what the invariants know of one breaker from the store's
// operations: the fleet's run of failures by replica, the forcing, the
// epoch and when it began, the last Reset and recovery.
type oracle struct {
	run       []share
	lastFail  time.Duration
	justified map[[2]uint64]bool // (store life, epoch) whose count reached the threshold
	crossing  *crossing          // the threshold's crossing, as processes were told of it
	forced    bool
	epoch     uint64
	epochAt   time.Duration
	// lastReset and lastRecovery are when the store last executed a
	// Reset and a successful probe's verdict; -1: never.
	lastReset, lastRecovery time.Duration
	recoveries              []time.Duration // every successful probe's verdict the store applied
	life                    uint64
	// given is the lease last given back, while the fleet asks for the
	// next.
	given *givenBack
	// carried is set while the fleet was open when the store lost its
	// data and has not closed since: re-opening it in the store's new
	// life restores an opening its count allowed.
	carried bool
}

// share is what one replica reported into a run.
type share struct {
	replica  int
	failures int64
}

// crossing is the fleet's count reaching its threshold in a closed epoch,
// and when the verdict that says so reached each process told of it.
type crossing struct {
	epoch uint64
	by    map[*proc]time.Duration
}

func newOracle() *oracle {
	return &oracle{justified: make(map[[2]uint64]bool), lastReset: -1, lastRecovery: -1}
}

// allowed reports whether the run trips a breaker of quorum q: Threshold
// failures once the q-1 replicas that reported the most are taken out.
func (o *oracle) allowed(q int) bool {
	by := map[int]int64{}
	for _, s := range o.run {
		by[s.replica] += s.failures
	}
	var list []int64
	var total int64
	for _, n := range by {
		list = append(list, n)
		total += n
	}
	slices.Sort(list)
	slices.Reverse(list)
	for i := 0; i < q-1 && i < len(list); i++ {
		total -= list[i]
	}
	return total >= Threshold
}

// failureRecorded is a failure report the store executed, of p.
func (w *world) failureRecorded(p *proc, name string, pol store.Policy, failures int64, v store.Verdict) {
	o := w.oracles[name]
	now := w.now()
	if now-o.lastFail >= store.DefaultFailureTTL {
		o.run = nil
	}
	o.run = append(o.run, share{replica: p.replica, failures: max(failures, 1)})
	o.lastFail = now
	if !o.allowed(quorumOf(name)) {
		return
	}
	o.justified[[2]uint64{o.life, v.Epoch}] = true
}

// toldCrossing is a failure report's verdict reaching p: if it says the
// fleet's count trips the breaker in a closed epoch, the fleet must open.
func (w *world) toldCrossing(p *proc, name string, pol store.Policy, v store.Verdict) {
	if v.Opened() || !pol.Trips(v) {
		return
	}
	o := w.oracles[name]
	if o.crossing == nil || o.crossing.epoch != v.Epoch {
		o.crossing = &crossing{epoch: v.Epoch, by: make(map[*proc]time.Duration)}
	}
	if _, ok := o.crossing.by[p]; !ok {
		o.crossing.by[p] = w.now()
	}
}

// runEnded is a success report the store executed: it ends the run.
func (w *world) runEnded(name string) {
	o := w.oracles[name]
	o.run, o.crossing = nil, nil
}

// recovered is a successful probe's verdict the store applied.
func (w *world) recovered(name string) {
	o := w.oracles[name]
	o.run, o.lastRecovery, o.carried = nil, w.now(), false
	o.recoveries = append(o.recoveries, w.now())
}

// wasReset is a Reset the store executed.
func (w *world) wasReset(name string) {
	o := w.oracles[name]
	o.run, o.forced, o.crossing, o.lastReset, o.carried = nil, false, nil, w.now(), false
	for _, f := range w.pending {
		if f.breaker == name {
			f.done = true
		}
	}
}

// forced is a ForceOpen the store executed, of p (nil: an operator on the
// store).
func (w *world) forced(p *proc, name string) {
	w.oracles[name].forced = true
	for _, f := range w.pending {
		if f.breaker == name && f.proc == p && !f.done {
			w.checked[InvForcingReachesStore]++ // and it held
			f.done = true
		}
	}
}

// lostData is the store losing its data: its forcings and counts go.
func (w *world) lostData() {
	for _, o := range w.oracles {
		o.carried = o.carried || o.epoch%2 == 1 && !o.forced
		o.run, o.forced, o.crossing = nil, false, nil
		o.given = nil // what is asked for afterwards is of the store's new life
		o.life++
	}
}

// opened is an Open the store executed, which opened breaker name in
// epoch (the store's status before it: before).
func (w *world) opened(p *proc, name string, epoch uint64, before store.Status) {
	w.quorumAllows(p, name, epoch, before)
}

// quorumAllows: under a Quorum q above 1 the store opens only on a count
// that still reaches the threshold once the q-1 replicas that reported
// the most are taken out. A replica is one whatever its names: a process
// restarted under the default name is the same replica.
func (w *world) quorumAllows(p *proc, name string, epoch uint64, before store.Status) {
	q := quorumOf(name)
	o := w.oracles[name]
	if q > 1 {
		w.checked[InvQuorum]++
	}
	if q <= 1 || o.allowed(q) || o.justified[[2]uint64{o.life, epoch}] || o.carried {
		return
	}
	for k := range o.justified {
		// Adopted, or opened after the store lost its data: a count of
		// the store's life before, which the opener's verdict saw (a
		// trip decided before the loss opens the epoch it was decided
		// in, which the emptied store is in again).
		if k[1] == epoch && (epoch > before.Epoch || k[0] < o.life) {
			return
		}
	}
	w.violate(InvQuorum, "%s opened %s in epoch %d on a run of %v (by replica), short of Threshold %d without the %d largest", p.alias, name, epoch, o.run, Threshold, q-1)
}

// givenBack is a probe lease given back (a probe released as ignored), and
// the processes that asked for a lease of its epoch since.
type givenBack struct {
	epoch  uint64
	at     time.Duration
	askers map[*proc]bool
}

// givenWindow is how long after a lease is given back the invariant
// counts the requests for the next: past the longest lag.
const givenWindow = 300 * time.Millisecond

// givenBack is a Resolve that gave the lease back.
func (w *world) givenBack(name string, epoch uint64) {
	w.oracles[name].given = &givenBack{epoch: epoch, at: w.now(), askers: make(map[*proc]bool)}
}

// leaseAsked is an AcquireProbe the store executed.
func (w *world) leaseAsked(p *proc, name string, epoch uint64, got bool) {
	o := w.oracles[name]
	g := o.given
	if g == nil || g.epoch != epoch || w.now()-g.at > givenWindow {
		o.given = nil
		return
	}
	g.askers[p] = true
	w.givenBackCostsOne(name, g)
	if got {
		w.checked[InvGivenBackCostsOne]++
		o.given = nil
	}
}

// givenBackCostsOne: a given-back lease costs one request, not one per
// process (a few may cross, each asking as its lag ends before it hears
// of the other's lease).
func (w *world) givenBackCostsOne(name string, g *givenBack) {
	if len(g.askers) > w.plan.Procs/2 {
		var who []string
		for p := range g.askers {
			who = append(who, p.alias)
		}
		slices.Sort(who)
		w.violate(InvGivenBackCostsOne, "the lease of %s in epoch %d was given back at %v, and %d processes asked for the next: %v",
			name, g.epoch, g.at, len(g.askers), who)
	}
}

// storeChanged runs after every operation of the store.
func (w *world) storeChanged() {
	now := w.now()
	for _, name := range breakerNames {
		st := w.read(name)
		o := w.oracles[name]
		if st.Epoch != o.epoch {
			if o.crossing != nil {
				w.checked[InvOpensInTime]++ // and it held
			}
			o.epoch, o.epochAt = st.Epoch, now
		}
		w.forcingStands(name, st)
	}
}

// forcingStands: a forcing the store executed stands until a Reset (or
// the loss of the store's data).
func (w *world) forcingStands(name string, st store.Status) {
	if !w.oracles[name].forced {
		return
	}
	w.checked[InvForcingStands]++
	if !st.Forced {
		w.violate(InvForcingStands, "%s was forced and not reset since, but the store says %s", name, w.status(st))
	}
}

// trial is a trial call under a lease, in flight or over.
type trial struct {
	proc    *proc
	breaker string
	lease   *lease
	start   time.Duration
}

// trialStarts records a probe's call reaching the service, and checks it
// under its lease; l nil is a local probe, outside the promise.
func (w *world) trialStarts(p *proc, name string, l *lease, fails bool) *trial {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ntrials++
	if l == nil {
		w.logf("%s trial %s (local probe) fails=%v", p.alias, name, fails)
		return nil
	}
	t := &trial{proc: p, breaker: name, lease: l, start: w.now()}
	w.checked[InvOneTrial]++
	w.checked[InvTrialInLease]++
	w.logf("%s trial %s under lease epoch=%d [%v, %v) fails=%v", p.alias, name, l.epoch, l.granted, l.ends, fails)
	w.oneTrial(t)
	if t.start < l.granted || t.start >= l.ends {
		w.violate(InvTrialInLease, "%s starts a trial of %s at %v, outside its lease [%v, %v) of epoch %d", p.alias, name, t.start, l.granted, l.ends, l.epoch)
	}
	w.trials = append(w.trials, t)
	return t
}

// oneTrial: at most one trial at a time among the processes on the store.
func (w *world) oneTrial(t *trial) {
	for _, o := range w.trials {
		if o.breaker == t.breaker {
			w.violate(InvOneTrial, "%s starts a trial of %s under the lease [%v, %v) of epoch %d while %s's trial, started at %v under [%v, %v) of epoch %d, runs",
				t.proc.alias, t.breaker, t.lease.granted, t.lease.ends, t.lease.epoch, o.proc.alias, o.start, o.lease.granted, o.lease.ends, o.lease.epoch)
		}
	}
}

// trialEnds records a trial's end: none runs past its lease's end.
func (w *world) trialEnds(t *trial) {
	w.trials = slices.DeleteFunc(w.trials, func(o *trial) bool { return o == t })
	if now := w.now(); now > t.lease.ends {
		w.violate(InvTrialInLease, "%s's trial of %s ends at %v, after its lease [%v, %v) of epoch %d", t.proc.alias, t.breaker, now, t.lease.granted, t.lease.ends, t.lease.epoch)
	}
}

// handForcing is a ForceOpen made through a process's breaker handle,
// until the store executes it (or a Reset or the process's end makes it
// moot).
type handForcing struct {
	proc    *proc
	breaker string
	at      time.Duration
	done    bool
}

// handReset is a Reset through p's handle: p's own forcings before it are
// lifted with it.
func (w *world) handReset(p *proc, name string) {
	for _, f := range w.pending {
		if f.proc == p && f.breaker == name {
			f.done = true
		}
	}
}

// checkpoint checks the invariants of the fleet's state.
func (w *world) checkpoint() {
	for _, name := range breakerNames {
		st := w.read(name)
		w.opensInTime(name, st)
		w.closesInTime(name, st)
		w.namesOpener(name, st)
		w.resetEndsRamp(name)
		w.rampEarned(name)
	}
	w.forcingReachesStore()
}

// liveProcs returns the live processes, in order of slot.
func (w *world) liveProcs() []*proc {
	var list []*proc
	for _, p := range w.procs {
		if p.alive {
			list = append(list, p)
		}
	}
	return list
}

// forcingReachesStore: a breaker forced through a handle while the store
// could not be reached forces the fleet once the store answers again.
func (w *world) forcingReachesStore() {
	for _, f := range w.pending {
		if f.done || w.oracles[f.breaker].forced || !f.proc.alive {
			continue
		}
		if w.now()-max(f.at, f.proc.lastFault) >= clean+StoreTimeout {
			w.checked[InvForcingReachesStore]++
			w.violate(InvForcingReachesStore, "%s forced %s at %v, its link has been clean since %v, and the store is not forced: %s",
				f.proc.alias, f.breaker, f.at, f.proc.lastFault, w.status(w.read(f.breaker)))
			f.done = true
		}
	}
}

// opensInTime: the fleet opens within openBound of a process being told
// that its count crossed the threshold, while that process's link is
// clean (whatever happens to the others': the crosser may be the one cut
// off).
func (w *world) opensInTime(name string, st store.Status) {
	o := w.oracles[name]
	c := o.crossing
	if c == nil {
		return
	}
	if st.Epoch != c.epoch {
		o.crossing = nil
		return
	}
	for _, p := range w.liveProcs() {
		at, ok := c.by[p]
		if !ok || p.lastFault >= at || w.now()-at < openBound {
			continue
		}
		w.checked[InvOpensInTime]++
		w.violate(InvOpensInTime, "%s was told at %v that the fleet's count of %s crossed its threshold in epoch %d, its link has been clean since, and the store is still %s",
			p.alias, at, name, c.epoch, w.status(st))
		o.crossing = nil
		return
	}
}

// closesInTime: once the service is healthy and no fault is active, the
// store closes within closeBound, and every process procBound later.
func (w *world) closesInTime(name string, st store.Status) {
	calm, ok := w.plan.calmSince(w.now())
	if !ok || w.oracles[name].forced {
		return
	}
	since := w.now() - calm
	if since >= closeBound {
		w.checked[InvClosesInTime]++
	}
	if since >= closeBound && st.Opened() {
		w.violate(InvClosesInTime, "the service is healthy and no fault active since %v, and the store still has %s %s", calm, name, w.status(st))
		return
	}
	if since < closeBound+procBound {
		return
	}
	for _, p := range w.liveProcs() {
		if s := p.brk[name].Stats(); s.State != breaker.Closed {
			w.violate(InvClosesInTime, "the service is healthy and no fault active since %v, the store has %s %s, and %s is still %v (forced=%v, store down=%v)",
				calm, name, w.status(st), p.alias, s.State, s.Forced, s.StoreDown)
			return
		}
	}
}

// namesOpener: every process that follows an opening names the store's
// opener and its error.
func (w *world) namesOpener(name string, st store.Status) {
	o := w.oracles[name]
	if !st.Opened() || st.Forced || w.now()-o.epochAt < heard {
		return
	}
	for _, p := range w.liveProcs() {
		if w.now()-p.lastFault < clean/2 || p.started > o.epochAt {
			continue
		}
		s := p.brk[name].Stats()
		if s.StoreDown || s.Forced || s.State == breaker.Closed {
			continue
		}
		w.checked[InvNamesOpener]++
		if w.alias(s.OpenedBy) != w.alias(st.Reason.By) || s.Cause != st.Reason.Why {
			w.violate(InvNamesOpener, "%s has %s %v opened by %q (%q); the store, since %v: %s",
				p.alias, name, s.State, w.alias(s.OpenedBy), s.Cause, o.epochAt, w.status(st))
			return
		}
		if err := p.openedBy[name]; !w.namesReason(p, err, st.Reason) {
			w.violate(InvNamesOpener, "%s's last event of %s opening says %v; the store, since %v: %s",
				p.alias, name, err, o.epochAt, w.status(st))
			return
		}
	}
}

// namesReason reports whether err, of p's event of an opening, says what
// the store's reason r says: the opener's own error in the opener, an
// *breaker.OpenedError naming the opener and its error in the others.
func (w *world) namesReason(p *proc, err error, r store.Reason) bool {
	var o *breaker.OpenedError
	switch {
	case errors.As(err, &o):
		return w.alias(o.By) == w.alias(r.By) && o.Text == r.Why
	case w.alias(r.By) != w.alias(p.name):
		return false
	case err == nil:
		return r.Why == ""
	}
	return reasontext.Line(err.Error(), reasontext.Max) == r.Why
}

// resetEndsRamp: a Reset ends every process's slow start.
func (w *world) resetEndsRamp(name string) {
	o := w.oracles[name]
	if o.lastReset < 0 || o.lastReset < o.lastRecovery || w.now()-o.lastReset < heard {
		return
	}
	for _, p := range w.liveProcs() {
		if p.lastFault >= o.lastReset-clean/2 || p.started >= o.lastReset {
			continue
		}
		s := p.brk[name].Stats()
		if s.State == breaker.Closed {
			w.checked[InvResetEndsRamp]++
		}
		if s.State == breaker.Closed && !s.SlowStartUntil.IsZero() {
			w.violate(InvResetEndsRamp, "the store reset %s at %v, and %s still ramps (admits %.2f) until %v",
				name, o.lastReset, p.alias, s.Admitted, s.SlowStartUntil.Add(-p.skew).Sub(w.start))
			return
		}
	}
}

// rampEarned: a process ramps up (a slow start) only after a recovery, a
// successful probe's verdict in the store or its own probe's
// success, and from it, or from when the change or the reply that says so
// reached it (a process counts a duration the store gives it from its
// arrival).
func (w *world) rampEarned(name string) {
	o := w.oracles[name]
	for _, p := range w.liveProcs() {
		if w.now()-p.lastFault < heard {
			continue
		}
		s := p.brk[name].Stats()
		if s.State != breaker.Closed || s.SlowStartUntil.IsZero() {
			continue
		}
		w.checked[InvRampEarned]++
		begin := s.SlowStartUntil.Add(-p.skew).Sub(w.start) - SlowStart
		near := func(r time.Duration) bool { return r-rampSlack <= begin && begin <= r+rampSlack }
		// A reply slow or late past the recovery tells this process of
		// it that much later (a process counts a duration from the
		// reply's arrival, never earlier than the store): its ramp
		// begins as late, up to the slowest reply.
		late := func(r time.Duration) bool {
			return r-rampSlack <= begin && begin <= r+StoreTimeout+300*time.Millisecond+rampSlack && p.lastFault >= r-rampSlack
		}
		if !slices.ContainsFunc(o.recoveries, near) && !slices.ContainsFunc(p.recoveries[name], near) && !slices.ContainsFunc(p.closings[name], near) &&
			!slices.ContainsFunc(o.recoveries, late) {
			w.violate(InvRampEarned, "%s ramps up %s from %v to %v, and no probe's verdict closed it in the store then (recoveries at %v), nor its own probe (at %v), nor did a closing reach it then (at %v)",
				p.alias, name, begin, begin+SlowStart, o.recoveries, p.recoveries[name], p.closings[name])
			return
		}
	}
}

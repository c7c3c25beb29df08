package store

import (
	"maps"
	"time"

	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/rule"
)

// The store's rules, once: what a store does with one breaker's stored
// state for each operation is the pure function apply, from the state, the
// store's instant and the operation to the next state and the reply. Memory
// runs it under its lock; the Redis scripts of package redisstore are held
// to it by a conformance test that plays random sequences of operations on
// a real redis-server and on a Memory, and compares every reply and every
// status read.

// entry is one breaker's stored state. Its zero value is a breaker the
// store has never heard of: closed, in epoch zero.
type entry struct {
	// epoch is odd while the breaker is opened, even while closed.
	epoch uint64
	// marker is the end of the open marker: in an opened epoch the end
	// of the open period, in a closed one the end of the fleet's slow
	// start. forced is an open marker without an end: forced open until
	// a Reset (in an opened epoch only).
	marker time.Time
	forced bool
	// probe holds the lease's token until probeTo.
	probe   string
	probeTo time.Time
	// why is who opened the opened epoch, and why; zero otherwise.
	why Reason
	// failures is the shared run of consecutive failures, forgotten at
	// failuresTo.
	failures   int64
	failuresTo time.Time
	// buckets are a window policy's counts: bucket index -> calls,
	// failures. reporters are what each process reported, for a quorum.
	// Both are copied before they change: an entry is a value.
	buckets   map[int64][2]int64
	reporters map[string]rule.Slide
}

// op is one operation of a store on a breaker: one of the op types below.
type op interface{ isOp() }

// opRecord is RecordFailure (failures above zero) or RecordSuccess under
// policy p; ttl is how long a run of failures is remembered.
type opRecord struct {
	p         Policy
	failures  int64
	successes []int64
	ttl       time.Duration
}

// opOpen is Open.
type opOpen struct {
	epoch  uint64
	period time.Duration
	why    Reason
}

// opAcquire is AcquireProbe.
type opAcquire struct {
	token string
	epoch uint64
	lease time.Duration
}

// opResolve is Resolve.
type opResolve struct {
	token  string
	epoch  uint64
	o      classify.Outcome
	reopen time.Duration
	why    Reason
}

// opHalfOpen is HalfOpener.HalfOpen.
type opHalfOpen struct{ epoch uint64 }

// opReset is Reset; opForce is ForceOpen; opRead is a status read.
type (
	opReset struct{}
	opForce struct{}
	opRead  struct{}
)

func (opRecord) isOp()   {}
func (opOpen) isOp()     {}
func (opAcquire) isOp()  {}
func (opResolve) isOp()  {}
func (opReset) isOp()    {}
func (opForce) isOp()    {}
func (opRead) isOp()     {}
func (opHalfOpen) isOp() {}

// result is a store's reply to an operation: the verdict (the status
// after the operation, and a record's counts), whether the operation
// applied (opened, won the lease, applied the verdict), and the change it
// announces, if any (its Name left for the caller to fill in).
type result struct {
	Verdict
	applied bool
	change  *Change
}

// apply is the store's rule for operation o on state e at the store's
// instant now: the next state and the reply. It is pure: e is not
// changed.
func apply(e entry, now time.Time, o op) (entry, result) {
	var r result
	switch o := o.(type) {
	case opRecord:
		e, r = e.record(o, now)
	case opOpen:
		e, r = e.open(o, now)
	case opAcquire:
		e, r = e.acquire(o, now)
	case opResolve:
		e, r = e.resolve(o, now)
	case opHalfOpen:
		e, r = e.halfOpen(o, now)
	case opReset:
		e.epoch += 2 - e.epoch%2
		e.clearOpened()
		e.clearCounts()
		e.marker = time.Time{}
		r.change = &Change{Kind: Reset, Epoch: e.epoch}
	case opForce:
		if !e.isForced() {
			e.force(e.epoch + 1 + e.epoch%2)
			r.change = &Change{Kind: Forced, Epoch: e.epoch}
		}
	case opRead:
	}
	r.Status = e.status(now)
	return e, r
}

// isForced reports whether e is forced open.
func (e *entry) isForced() bool { return e.forced && e.epoch%2 == 1 }

// force forces e open in the opened epoch epoch.
func (e *entry) force(epoch uint64) {
	e.epoch = epoch
	e.clearOpened()
	e.forced = true
}

// clearOpened drops what belongs to an opened epoch: the open marker, the
// lease, the forcing and the reason.
func (e *entry) clearOpened() {
	e.marker, e.forced, e.probe, e.probeTo, e.why = time.Time{}, false, "", time.Time{}, Reason{}
}

// clearCounts drops the counts of the closed epoch: the run, the window
// and the reporters.
func (e *entry) clearCounts() {
	e.failures, e.failuresTo, e.buckets, e.reporters = 0, time.Time{}, nil, nil
}

// remaining is what is left of a deadline at now: zero once it passed.
func remaining(until, now time.Time) time.Duration {
	if d := until.Sub(now); d > 0 {
		return d
	}
	return 0
}

// status is e's status at now. In a closed epoch the open marker is the
// fleet's slow start.
func (e *entry) status(now time.Time) Status {
	st := Status{Epoch: e.epoch, Probe: remaining(e.probeTo, now)}
	switch {
	case e.epoch%2 == 0:
		st.SlowStart = remaining(e.marker, now)
	case e.forced:
		st.Forced = true
	default:
		st.Open = remaining(e.marker, now)
		st.Reason = e.why
	}
	return st
}

// reseed handles an epoch a caller names above the store's: the store
// lost its data (a restart, a FLUSHALL). It reports whether the caller may
// go on in its epoch. A forcing stands: it moves to the next opened epoch
// above the caller's, so that every process follows it whatever epoch it
// was in; the caller's operation is refused. Otherwise the store takes the
// caller's epoch with nothing in it.
func (e *entry) reseed(epoch uint64) (bool, *Change) {
	if epoch <= e.epoch {
		return true, nil
	}
	if e.isForced() {
		e.force(epoch + 1 + epoch%2)
		return false, &Change{Kind: Forced, Epoch: e.epoch}
	}
	e.epoch = epoch
	e.clearOpened()
	return true, nil
}

// open is Open: from the caller's closed epoch (or one above the store's),
// the breaker opens for period in the next epoch, and the first opener's
// period stands.
func (e entry) open(o opOpen, now time.Time) (entry, result) {
	var r result
	if o.epoch%2 == 1 {
		return e, r
	}
	ok, ch := e.reseed(o.epoch)
	if !ok {
		r.change = ch
		return e, r
	}
	if o.epoch != e.epoch {
		return e, r
	}
	e.epoch++
	e.clearOpened()
	if o.period > 0 {
		e.marker = now.Add(o.period)
	}
	e.why = o.why.clean()
	r.applied = true
	r.change = &Change{Kind: Opened, Epoch: e.epoch, Open: max(o.period, 0), Reason: e.why}
	return e, r
}

// acquire is AcquireProbe: the lease goes to the caller in the breaker's
// opened epoch once its period is over, if nobody holds it and it is not
// forced. A caller in an opened epoch above the store's re-seeds it, held
// open for one lease, so that a probe in flight from before the loss ends
// before another starts; one in a closed epoch above the store's makes it
// that closed epoch: an even epoch is never taken for an opened one.
func (e entry) acquire(o opAcquire, now time.Time) (entry, result) {
	var r result
	above := o.epoch > e.epoch
	ok, ch := e.reseed(o.epoch)
	switch {
	case !ok:
		r.change = ch
		return e, r
	case above:
		if e.epoch%2 == 1 {
			e.marker = now.Add(o.lease)
		}
		return e, r
	}
	st := e.status(now)
	if o.epoch != e.epoch || !st.Opened() || st.Open > 0 || st.Probe > 0 || st.Forced {
		return e, r
	}
	e.probe, e.probeTo = o.token, now.Add(o.lease)
	r.applied = true
	r.change = &Change{Kind: Leased, Epoch: e.epoch, Probe: o.lease}
	return e, r
}

// resolve is Resolve: the verdict applies only while the caller's token
// holds the lease of its epoch.
func (e entry) resolve(o opResolve, now time.Time) (entry, result) {
	var r result
	if e.epoch != o.epoch || e.probe != o.token || remaining(e.probeTo, now) == 0 {
		return e, r
	}
	e.probe, e.probeTo = "", time.Time{}
	r.applied = true
	switch o.o {
	case classify.Success:
		e.epoch++
		e.clearOpened()
		e.clearCounts()
		if o.reopen > 0 {
			e.marker = now.Add(o.reopen) // the fleet's slow start
		}
		r.change = &Change{Kind: Closed, Epoch: e.epoch, SlowStart: max(o.reopen, 0)}
	case classify.Failure:
		e.epoch += 2
		e.clearOpened()
		e.marker, e.why = now.Add(o.reopen), o.why.clean()
		r.change = &Change{Kind: Opened, Epoch: e.epoch, Open: o.reopen, Reason: e.why}
	default:
		r.change = &Change{Kind: Released, Epoch: e.epoch}
	}
	return e, r
}

// halfOpen is HalfOpener.HalfOpen: in the caller's opened epoch, while
// its period runs, unforced and with no lease held, the period ends now:
// the epoch moves to the next opened one, as a failed probe's reopening
// moves it, with the period over and the opener's reason kept, announced
// as an opening of that epoch with a period of zero.
func (e entry) halfOpen(o opHalfOpen, now time.Time) (entry, result) {
	st := e.status(now)
	if o.epoch != e.epoch || !st.Opened() || st.Forced || st.Open == 0 || st.Probe > 0 {
		return e, result{}
	}
	why := e.why
	e.epoch += 2
	e.clearOpened()
	e.why = why
	return e, result{applied: true, change: &Change{Kind: Opened, Epoch: e.epoch, Reason: e.why}}
}

// record is RecordFailure and RecordSuccess: the failures and successes
// go to the shared run or window, and the reply gives its counts.
func (e entry) record(o opRecord, now time.Time) (entry, result) {
	var r result
	p := o.p
	switch {
	case p.window():
		r.Calls, r.Failures = e.window(p, now, o.failures, o.successes)
	case o.failures == 0:
		// A success ends the run of consecutive failures, and its
		// reporters; its reply has nothing more to say.
		e.failures, e.failuresTo, e.reporters = 0, time.Time{}, nil
		return e, result{}
	default:
		if !now.Before(e.failuresTo) {
			e.failures, e.reporters = 0, nil
		}
		e.failures += o.failures
		e.failuresTo = now.Add(o.ttl)
		r.Failures = e.failures
	}
	if p.Quorum > 1 {
		calls := o.failures
		if p.window() {
			calls += sum(o.successes)
		}
		e.report(p, now, calls, o.failures, &r.Verdict)
	}
	return e, r
}

// window adds failures to the current bucket of p, and successes by age
// to theirs, and returns the window's totals.
func (e *entry) window(p Policy, now time.Time, failures int64, successes []int64) (int64, int64) {
	idx := p.bucket(now)
	buckets := maps.Clone(e.buckets)
	if buckets == nil {
		buckets = make(map[int64][2]int64)
	}
	add := func(i, calls, failures int64) {
		if calls > 0 {
			c := buckets[i]
			buckets[i] = [2]int64{c[0] + calls, c[1] + failures}
		}
	}
	add(idx, failures, failures)
	for age, n := range successes {
		if age < p.Buckets {
			add(idx-int64(age), n, 0)
		}
	}
	var calls, fails int64
	for i, c := range buckets {
		if i <= idx-int64(p.Buckets) {
			delete(buckets, i)
			continue
		}
		calls += c[0]
		fails += c[1]
	}
	e.buckets = buckets
	return calls, fails
}

// report files what p.Reporter reported at now (failures of them failed,
// of calls), and fills in what the quorum rule needs of the reporters (see
// Verdict.LargestCalls): of the run, or of the window.
func (e *entry) report(p Policy, now time.Time, calls, failures int64, v *Verdict) {
	reporters := maps.Clone(e.reporters)
	if reporters == nil {
		reporters = make(map[string]rule.Slide)
	}
	n := max(p.Buckets, 1)
	var idx int64
	if p.window() {
		idx = p.bucket(now)
	}
	if calls > 0 {
		// A run keeps its reporters' failures in one span.
		reporters[p.Reporter] = reporters[p.Reporter].Add(idx, n, rule.Share{Calls: calls, Failures: failures})
	}
	shares := make([]rule.Share, 0, len(reporters))
	for name, sl := range reporters {
		sh := sl.At(idx, n)
		if sh == (rule.Share{}) {
			delete(reporters, name) // out of the window
			continue
		}
		if sh.Failures > 0 {
			v.Processes++
		}
		shares = append(shares, sh)
	}
	e.reporters = reporters
	top := rule.Largest(shares, p.Quorum)
	v.LargestFailures = top.Failures
	if p.window() {
		v.LargestCalls = top.Calls // a run counts no calls
	}
}

// sum returns the sum of counts.
func sum(counts []int64) int64 {
	var n int64
	for _, c := range counts {
		n += c
	}
	return n
}

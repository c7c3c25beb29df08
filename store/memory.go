package store

import (
	"context"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/rule"
)

// Memory is a Store that shares breakers between the managers of one
// process. It is the way to test and to demonstrate shared breakers without
// Redis; it cannot share anything with another process.
//
// Its clock measures every period and lease; pass the managers' mock clock
// in tests. Memory is safe for concurrent use.
type Memory struct {
	clk clock.Clock

	mu       sync.Mutex
	breakers map[string]*memBreaker
	watchers map[*memWatcher]struct{}
}

type memBreaker struct {
	epoch      uint64
	failures   int64
	failuresTo time.Time // when the run of failures is forgotten
	openTo     time.Time
	probe      string
	probeTo    time.Time
	forced     bool                // forced open until a Reset
	why        Reason              // of the opened epoch; zero otherwise
	buckets    map[int64]*[2]int64 // bucket index -> calls, failures
	// reporters are what each process reported, for a quorum: its
	// failures in the run, or its calls and failures in the window.
	reporters map[string]*rule.Slide
}

type memWatcher struct {
	fn func(Change)
}

// NewMemory returns an empty Memory store timed by clk; nil means the real
// clock.
func NewMemory(clk clock.Clock) *Memory {
	if clk == nil {
		clk = clock.New()
	}
	return &Memory{clk: clk, breakers: make(map[string]*memBreaker), watchers: make(map[*memWatcher]struct{})}
}

func (m *Memory) entry(name string) *memBreaker {
	b := m.breakers[name]
	if b == nil {
		b = &memBreaker{}
		m.breakers[name] = b
	}
	return b
}

func remaining(until, now time.Time) time.Duration {
	if d := until.Sub(now); d > 0 {
		return d
	}
	return 0
}

// status is b's status at now. In a closed epoch openTo is the end of the
// slow start a recovery began, as the Redis store keeps it in its open
// marker.
func (b *memBreaker) status(now time.Time) Status {
	if b.epoch%2 == 0 {
		return Status{Epoch: b.epoch, Probe: remaining(b.probeTo, now), SlowStart: remaining(b.openTo, now)}
	}
	forced := b.forced
	st := Status{Epoch: b.epoch, Open: remaining(b.openTo, now), Probe: remaining(b.probeTo, now), Forced: forced}
	if !forced {
		st.Reason = b.why
	}
	return st
}

// window adds failures to the current bucket of p, and successes by age
// to theirs, and returns the window's totals.
func (b *memBreaker) window(p Policy, now time.Time, failures int64, successes []int64) (int64, int64) {
	idx := p.Bucket(now)
	if b.buckets == nil {
		b.buckets = make(map[int64]*[2]int64)
	}
	add := func(i, calls, failures int64) {
		if calls <= 0 {
			return
		}
		c := b.buckets[i]
		if c == nil {
			c = new([2]int64)
			b.buckets[i] = c
		}
		c[0] += calls
		c[1] += failures
	}
	add(idx, failures, failures)
	for age, n := range successes {
		if age < p.Buckets {
			add(idx-int64(age), n, 0)
		}
	}
	var sumC, sumF int64
	for i, c := range b.buckets {
		if i <= idx-int64(p.Buckets) {
			delete(b.buckets, i)
			continue
		}
		sumC += c[0]
		sumF += c[1]
	}
	return sumC, sumF
}

// RecordFailure implements Store.
func (m *Memory) RecordFailure(ctx context.Context, name string, p Policy, failures int64, successes []int64) (Verdict, error) {
	return m.record(ctx, name, p, max(failures, 1), successes)
}

// RecordSuccess implements Store.
func (m *Memory) RecordSuccess(ctx context.Context, name string, p Policy, successes []int64) (Verdict, error) {
	return m.record(ctx, name, p, 0, successes)
}

// record is RecordFailure (one failure) and RecordSuccess (none): it adds
// the failure and the successes to the breaker's shared run or window, and
// answers with the verdict.
func (m *Memory) record(ctx context.Context, name string, p Policy, failures int64, successes []int64) (Verdict, error) {
	if err := ctx.Err(); err != nil {
		return Verdict{}, err
	}
	now := m.clk.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.entry(name)
	var v Verdict
	if p.window() {
		v.Calls, v.Failures = b.window(p, now, failures, successes)
	} else {
		v.Failures = b.run(now, failures)
	}
	if p.Quorum > 1 && (failures > 0 || p.window()) {
		calls := failures
		if p.window() {
			calls += sum(successes)
		}
		b.report(p, now, calls, failures, &v)
	}
	v.Status = b.status(now)
	return v, nil
}

// run adds a call to the shared run of consecutive failures and returns
// the run's length: a failure lengthens it (one DefaultFailureTTL or more
// after the run's last failure starts a new run), a success ends it, and
// with it the list of the processes that reported it.
func (b *memBreaker) run(now time.Time, failures int64) int64 {
	if failures == 0 || !now.Before(b.failuresTo) {
		b.failures, b.reporters = 0, nil
	}
	if failures > 0 {
		b.failures += failures
		b.failuresTo = now.Add(DefaultFailureTTL)
	}
	return b.failures
}

// report files what p.Reporter reported now (failures of them failed, of
// calls), and fills in what the quorum rule needs of the reporters (see
// Verdict.Largest): of the run, or of the window.
func (b *memBreaker) report(p Policy, now time.Time, calls, failures int64, v *Verdict) {
	if b.reporters == nil {
		b.reporters = make(map[string]*rule.Slide)
	}
	sl := b.reporters[p.Reporter]
	if sl == nil && calls > 0 {
		sl = new(rule.Slide)
		b.reporters[p.Reporter] = sl
	}
	n := max(p.Buckets, 1)
	var idx int64
	if p.window() {
		idx = p.Bucket(now)
	}
	if sl != nil && calls > 0 {
		// A run keeps its reporters' failures in one span.
		*sl = sl.Add(idx, n, rule.Share{Calls: calls, Failures: failures})
	}
	shares := make([]rule.Share, 0, len(b.reporters))
	for r, sl := range b.reporters {
		sh := sl.At(idx, n)
		if sh == (rule.Share{}) {
			delete(b.reporters, r) // out of the window
			continue
		}
		if sh.Failures > 0 {
			v.Processes++
		}
		shares = append(shares, sh)
	}
	top := rule.Largest(shares, p.Quorum)
	v.LargestCalls, v.LargestFailures = top.Calls, top.Failures
}

// Open implements Store.
func (m *Memory) Open(ctx context.Context, name string, epoch uint64, period time.Duration, why Reason) (Status, bool, error) {
	if err := ctx.Err(); err != nil {
		return Status{}, false, err
	}
	now := m.clk.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.entry(name)
	if epoch%2 == 1 || epoch < b.epoch || epoch == b.epoch && b.epoch%2 == 1 {
		return b.status(now), false, nil
	}
	b.epoch = epoch + 1
	b.openTo = now.Add(period)
	b.probe, b.probeTo, b.forced = "", time.Time{}, false
	b.why = why.clean()
	m.publish(Change{Name: name, Kind: Opened, Epoch: b.epoch, Open: period, Reason: b.why})
	return b.status(now), true, nil
}

// AcquireProbe implements Store.
func (m *Memory) AcquireProbe(ctx context.Context, name, token string, epoch uint64, lease time.Duration) (bool, Status, error) {
	if err := ctx.Err(); err != nil {
		return false, Status{}, err
	}
	now := m.clk.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.entry(name)
	if epoch > b.epoch {
		// The store lost its data: take the caller's epoch, and hold the
		// fleet off for one lease, so that a probe in flight from before
		// the loss ends before another starts.
		b.epoch, b.openTo, b.probe, b.probeTo, b.forced = epoch, now.Add(lease), "", time.Time{}, false
		b.why = Reason{}
		return false, b.status(now), nil
	}
	st := b.status(now)
	if epoch != b.epoch || !st.Opened() || st.Open > 0 || st.Probe > 0 || st.Forced {
		return false, st, nil
	}
	b.probe, b.probeTo = token, now.Add(lease)
	m.publish(Change{Name: name, Kind: Leased, Epoch: b.epoch, Probe: lease})
	return true, b.status(now), nil
}

// Resolve implements Store.
func (m *Memory) Resolve(ctx context.Context, name, token string, epoch uint64, o classify.Outcome, reopen time.Duration, why Reason) (Status, bool, error) {
	if err := ctx.Err(); err != nil {
		return Status{}, false, err
	}
	now := m.clk.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.entry(name)
	if b.epoch != epoch || b.probe != token || remaining(b.probeTo, now) == 0 {
		return b.status(now), false, nil
	}
	b.probe, b.probeTo = "", time.Time{}
	switch o {
	case classify.Success:
		b.epoch++
		b.openTo, b.failures, b.buckets, b.reporters, b.why = time.Time{}, 0, nil, nil, Reason{}
		if reopen > 0 {
			b.openTo = now.Add(reopen) // the fleet's slow start
		}
		m.publish(Change{Name: name, Kind: Closed, Epoch: b.epoch, SlowStart: max(reopen, 0)})
	case classify.Failure:
		b.epoch += 2
		b.openTo, b.why = now.Add(reopen), why.clean()
		m.publish(Change{Name: name, Kind: Opened, Epoch: b.epoch, Open: reopen, Reason: b.why})
	default:
		m.publish(Change{Name: name, Kind: Released, Epoch: b.epoch})
	}
	return b.status(now), true, nil
}

// Reset implements Store.
func (m *Memory) Reset(ctx context.Context, name string) (Status, error) {
	if err := ctx.Err(); err != nil {
		return Status{}, err
	}
	now := m.clk.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.entry(name)
	b.epoch += 2 - b.epoch%2
	b.openTo, b.probe, b.probeTo, b.failures, b.buckets, b.forced, b.reporters = time.Time{}, "", time.Time{}, 0, nil, false, nil
	b.why = Reason{}
	m.publish(Change{Name: name, Kind: Reset, Epoch: b.epoch})
	return b.status(now), nil
}

// ForceOpen implements Store.
func (m *Memory) ForceOpen(ctx context.Context, name string) (Status, error) {
	if err := ctx.Err(); err != nil {
		return Status{}, err
	}
	now := m.clk.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.entry(name)
	if b.forced && b.epoch%2 == 1 {
		return b.status(now), nil
	}
	b.epoch += 1 + b.epoch%2
	b.openTo, b.probe, b.probeTo, b.forced, b.why = time.Time{}, "", time.Time{}, true, Reason{}
	m.publish(Change{Name: name, Kind: Forced, Epoch: b.epoch})
	return b.status(now), nil
}

// Status implements Store.
func (m *Memory) Status(ctx context.Context, names []string) ([]Status, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := m.clk.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Status, len(names))
	for i, n := range names {
		if b := m.breakers[n]; b != nil {
			out[i] = b.status(now)
		}
	}
	return out, nil
}

// Check implements Store: a Memory holds any name.
func (m *Memory) Check(name string) error { return nil }

// Watch implements Store. Memory calls fn on the goroutine of the call
// that made the change, before that call returns, with the store's lock
// held: fn must not call the store. So a manager's Sync after a change sees
// it applied in every manager on the store (see manager.Manager.Sync).
func (m *Memory) Watch(ctx context.Context, ready func(), fn func(Change)) error {
	w := &memWatcher{fn: fn}
	m.mu.Lock()
	m.watchers[w] = struct{}{}
	m.mu.Unlock()
	ready()
	<-ctx.Done()
	m.mu.Lock()
	delete(m.watchers, w)
	m.mu.Unlock()
	return nil
}

// publish hands c to every watcher, in the order of the changes: m.mu is
// held.
func (m *Memory) publish(c Change) {
	for w := range m.watchers {
		w.fn(c)
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

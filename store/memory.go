package store

import (
	"context"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/classify"
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
	breakers map[string]entry
	watchers map[*memWatcher]struct{}
}

// memWatcher is one Watch of a Memory.
type memWatcher struct {
	fn func(Change)
}

// NewMemory returns an empty Memory store timed by clk; nil means the real
// clock.
func NewMemory(clk clock.Clock) *Memory {
	if clk == nil {
		clk = clock.New()
	}
	return &Memory{clk: clk, breakers: make(map[string]entry), watchers: make(map[*memWatcher]struct{})}
}

// do runs operation o on the breaker name under the store's rules (apply)
// and announces the change it made, if any.
func (m *Memory) do(ctx context.Context, name string, o op) (result, error) {
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	now := m.clk.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	e, r := apply(m.breakers[name], now, o)
	m.breakers[name] = e
	if r.change != nil {
		c := *r.change
		c.Name = name
		m.publish(c)
	}
	return r, nil
}

// RecordFailure implements Store.
func (m *Memory) RecordFailure(ctx context.Context, name string, p Policy, failures int64, successes []int64) (Verdict, error) {
	r, err := m.do(ctx, name, opRecord{p: p, failures: max(failures, 1), successes: successes, ttl: DefaultFailureTTL})
	return r.Verdict, err
}

// RecordSuccess implements Store.
func (m *Memory) RecordSuccess(ctx context.Context, name string, p Policy, successes []int64) (Verdict, error) {
	r, err := m.do(ctx, name, opRecord{p: p, successes: successes, ttl: DefaultFailureTTL})
	return r.Verdict, err
}

// Open implements Store.
func (m *Memory) Open(ctx context.Context, name string, epoch uint64, period time.Duration, why Reason) (Status, bool, error) {
	r, err := m.do(ctx, name, opOpen{epoch: epoch, period: period, why: why})
	return r.Status, r.applied, err
}

// AcquireProbe implements Store.
func (m *Memory) AcquireProbe(ctx context.Context, name, token string, epoch uint64, lease time.Duration) (bool, Status, error) {
	r, err := m.do(ctx, name, opAcquire{token: token, epoch: epoch, lease: lease})
	return r.applied, r.Status, err
}

// Resolve implements Store.
func (m *Memory) Resolve(ctx context.Context, name, token string, epoch uint64, o classify.Outcome, reopen time.Duration, why Reason) (Status, bool, error) {
	r, err := m.do(ctx, name, opResolve{token: token, epoch: epoch, o: o, reopen: reopen, why: why})
	return r.Status, r.applied, err
}

// Reset implements Store.
func (m *Memory) Reset(ctx context.Context, name string) (Status, error) {
	r, err := m.do(ctx, name, opReset{})
	return r.Status, err
}

// ForceOpen implements Store.
func (m *Memory) ForceOpen(ctx context.Context, name string) (Status, error) {
	r, err := m.do(ctx, name, opForce{})
	return r.Status, err
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
		_, r := apply(m.breakers[n], now, opRead{})
		out[i] = r.Status
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

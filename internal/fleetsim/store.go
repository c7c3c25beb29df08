package fleetsim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/store"
)

// This file is the store of faults: every process has a handle on it, a
// store.Store that delays each call's request and reply and each change
// its watch delivers, and fails or holds them as the plan says, over one
// store.Memory that the world swaps for a fresh one on a data loss.

// Errors the store of faults returns.
var (
	errPartitioned = errors.New("fleetsim: partitioned from the store")
	errLost        = errors.New("fleetsim: reply lost")
	errBroken      = errors.New("fleetsim: watch broken")
)

// Delays of a healthy link, and of the faults.
const (
	minRequest, maxRequest = 50 * time.Microsecond, 2 * time.Millisecond
	minReply, maxReply     = 50 * time.Microsecond, 3 * time.Millisecond
	minChange, maxChange   = 200 * time.Microsecond, 8 * time.Millisecond
	minLateChange          = 50 * time.Millisecond
	maxLateChange          = 500 * time.Millisecond
	// A slow reply comes after a probe lease (ProbeTimeout) has run
	// out, within the caller's deadline (StoreTimeout).
	minSlow, maxSlow = ProbeTimeout + 20*time.Millisecond, StoreTimeout - 20*time.Millisecond
)

// handle is one process's link to the store: a store.Store.
type handle struct {
	w    *world
	proc *proc

	counts sync.Map // operation -> *atomic.Uint64: the draws' keys

	// Guarded by w.mu, by breaker: the AcquireProbe calls made, and the
	// last lease granted and answered, with the call that won it.
	acquires map[string]uint64
	won      map[string]*lease
}

// lease is a probe lease the store granted, as the invariants see it.
type lease struct {
	call          uint64 // the AcquireProbe call, counted by handle.acquires
	epoch         uint64
	granted, ends time.Duration
}

// count returns how many calls of op the handle made before this one.
func (h *handle) count(op string) uint64 {
	v, _ := h.counts.LoadOrStore(op, new(atomic.Uint64))
	return v.(*atomic.Uint64).Add(1) - 1
}

// opKey names an operation for the draws.
func opKey(op string) uint64 {
	var k uint64
	for _, c := range op {
		k = k*131 + uint64(c)
	}
	return k
}

// call runs op (run, on the Memory, under the world's lock) as the plan
// says: after a request's delay; failed at once while partitioned; held
// while the process is paused; its reply delayed, late past the caller's
// deadline or lost while such a span of faults is drawn.
func (h *handle) call(ctx context.Context, op string, run func(m *store.Memory) string) error {
	w, p := h.w, h.proc
	r := w.draws.rand(keyCall, uint64(p.id), opKey(op), h.count(op))
	now := w.now()
	if w.plan.active(Partition, p.slot, now) {
		w.faulted(p, "%s: partitioned", op)
		return errPartitioned
	}
	if until, ok := w.plan.paused(p.slot, now); ok {
		if !sleepCtx(ctx, until-now) {
			// The request waits in the paused process: it reaches
			// the store when the pause ends, long after its caller
			// gave up.
			w.faulted(p, "%s: held by a pause, runs at its end", op)
			w.spawn(func() {
				time.Sleep(until - w.now() + between(r, minRequest, maxRequest))
				w.exec(h, op+" (held)", run)
			})
			return ctx.Err()
		}
	}
	if !sleepCtx(ctx, between(r, minRequest, maxRequest)) {
		return ctx.Err()
	}
	now = w.now()
	fault := w.plan.replyFault(p.slot, now, r)
	w.exec(h, op, run)
	delay := between(r, minReply, maxReply)
	switch fault {
	case LateReplies:
		w.faulted(p, "%s: reply late", op)
		delay = StoreTimeout + between(r, time.Millisecond, 300*time.Millisecond)
	case SlowReplies:
		w.faulted(p, "%s: reply slow", op)
		delay = between(r, minSlow, maxSlow)
	case LostReplies:
		w.faulted(p, "%s: reply lost", op)
		sleepCtx(ctx, delay)
		return errLost
	}
	at := w.now() + delay
	if until, ok := w.plan.paused(p.slot, at); ok {
		at = until + delay
	}
	if !sleepCtx(ctx, at-w.now()) {
		return ctx.Err()
	}
	return nil
}

// sleepCtx sleeps d, or less if ctx is done first; it reports whether it
// slept the whole of d.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// exec runs op on the Memory under the world's lock, logs it with what
// run returned, delivers the changes it made, and checks the invariants
// of the store.
func (w *world) exec(h *handle, op string, run func(m *store.Memory) string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	who := "store"
	if h != nil {
		who = h.proc.alias
	}
	text := run(w.mem)
	if strings.HasPrefix(op, "status ") {
		op = "status" // the names read are in the text
	}
	w.logf("%s %s -> %s", who, op, text)
	changes := w.changes
	w.changes = nil
	for _, c := range changes {
		w.deliver(c)
	}
	w.storeChanged()
}

// deliver sends change c to every watch, each with its delay and the
// faults the plan draws for it; w.mu is held.
func (w *world) deliver(c store.Change) {
	w.seq++
	now := w.now()
	for _, s := range w.subs {
		if s.done {
			continue
		}
		r := w.draws.rand(keyChange, w.seq, uint64(s.id))
		p := s.proc
		at := now + between(r, minChange, maxChange)
		switch w.plan.changeFault(p.slot, now, r) {
		case LostChanges:
			w.faultedLocked(p, "change %s %s epoch=%d lost", c.Name, c.Kind, c.Epoch)
			continue
		case LateChanges:
			w.faultedLocked(p, "change %s %s epoch=%d late", c.Name, c.Kind, c.Epoch)
			at = now + between(r, minLateChange, maxLateChange)
		case DupChanges:
			w.faultedLocked(p, "change %s %s epoch=%d twice", c.Name, c.Kind, c.Epoch)
			s.send(w, c, max(at, s.last+time.Microsecond)+between(r, time.Millisecond, 50*time.Millisecond))
			fallthrough
		default:
			at = max(at, s.last+time.Microsecond)
			s.last = at
		}
		if until, ok := w.plan.paused(p.slot, at); ok {
			at = until + (at - now)
		}
		s.send(w, c, at)
	}
}

// sub is one subscription of a process's watch.
type sub struct {
	id   int
	proc *proc
	fn   func(store.Change)
	last time.Duration // when its last change in order is delivered

	mu     sync.Mutex // held while fn runs, so that none runs after Watch returns
	done   bool       // guarded by the world's lock and mu
	broken chan struct{}
}

// send delivers c to the subscription at instant at (the world's lock is
// held).
func (s *sub) send(w *world, c store.Change, at time.Duration) {
	time.AfterFunc(at-w.now(), func() {
		if c.Kind == store.Closed {
			w.mu.Lock()
			s.proc.closings[c.Name] = append(s.proc.closings[c.Name], w.now())
			w.mu.Unlock()
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.done {
			s.fn(c)
		}
	})
}

// end ends the subscription; w.mu is held.
func (s *sub) end() {
	s.mu.Lock()
	if !s.done {
		s.done = true
		close(s.broken)
	}
	s.mu.Unlock()
}

// Watch implements store.Store: a subscription that the world breaks on a
// partition of its process and on a data loss.
func (h *handle) Watch(ctx context.Context, ready func(), fn func(store.Change)) error {
	w, p := h.w, h.proc
	r := w.draws.rand(keyCall, uint64(p.id), opKey("watch"), h.count("watch"))
	now := w.now()
	if w.plan.active(Partition, p.slot, now) {
		sleepCtx(ctx, between(r, minRequest, maxRequest))
		return errPartitioned
	}
	if until, ok := w.plan.paused(p.slot, now); ok && !sleepCtx(ctx, until-now) {
		return nil
	}
	if !sleepCtx(ctx, between(r, minRequest, maxReply)) {
		return nil
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-ctx.Done()
		return nil
	}
	w.nextSub++
	s := &sub{id: w.nextSub, proc: p, fn: fn, broken: make(chan struct{})}
	w.subs = append(w.subs, s)
	w.logf("%s watch subscribed", p.alias)
	w.mu.Unlock()
	ready()
	select {
	case <-ctx.Done():
		w.mu.Lock()
		s.end()
		w.mu.Unlock()
		return nil
	case <-s.broken:
		return errBroken
	}
}

// breakWatches breaks the watches of the processes of slots (all for
// nil); w.mu is held.
func (w *world) breakWatches(slots []int) {
	w.subs = slices.DeleteFunc(w.subs, func(s *sub) bool {
		if slots == nil || slices.Contains(slots, s.proc.slot) {
			s.end()
			return true
		}
		return s.done
	})
}

// newMemory makes the world's Memory, and subscribes to its changes: they
// are delivered, with their faults, once the operation that made them is
// logged. w.mu is held.
func (w *world) newMemory() {
	if w.memStop != nil {
		w.memStop()
	}
	m := store.NewMemory(clock.New())
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Watch(ctx, func() { close(ready) }, func(c store.Change) {
			// Called on the goroutine of the operation, which holds
			// w.mu.
			w.changes = append(w.changes, c)
		})
	}()
	<-ready
	w.mem = m
	w.memStop = func() { cancel(); <-done }
}

// RecordFailure implements store.Store.
func (h *handle) RecordFailure(ctx context.Context, name string, p store.Policy, failures int64, successes []int64) (store.Verdict, error) {
	var v store.Verdict
	err := h.call(ctx, "record_failure", func(m *store.Memory) string {
		v, _ = m.RecordFailure(context.Background(), name, p, failures, successes)
		h.w.failureRecorded(h.proc, name, p, failures, v)
		return fmt.Sprintf("%s failures=%d run=%d %s", name, failures, v.Failures, h.w.status(v.Status))
	})
	if err != nil {
		return store.Verdict{}, err
	}
	h.w.mu.Lock()
	h.w.toldCrossing(h.proc, name, p, v)
	h.w.mu.Unlock()
	return v, nil
}

// RecordSuccess implements store.Store.
func (h *handle) RecordSuccess(ctx context.Context, name string, p store.Policy, successes []int64) (store.Verdict, error) {
	var v store.Verdict
	err := h.call(ctx, "record_success", func(m *store.Memory) string {
		v, _ = m.RecordSuccess(context.Background(), name, p, successes)
		h.w.runEnded(name)
		return fmt.Sprintf("%s %s", name, h.w.status(v.Status))
	})
	if err != nil {
		return store.Verdict{}, err
	}
	return v, nil
}

// Open implements store.Store.
func (h *handle) Open(ctx context.Context, name string, epoch uint64, period time.Duration, why store.Reason) (store.Status, bool, error) {
	var st store.Status
	var opened bool
	err := h.call(ctx, "open", func(m *store.Memory) string {
		before := h.w.read(name)
		st, opened, _ = m.Open(context.Background(), name, epoch, period, why)
		if opened {
			h.w.opened(h.proc, name, epoch, before)
		}
		return fmt.Sprintf("%s epoch=%d period=%v opened=%v %s", name, epoch, period, opened, h.w.status(st))
	})
	if err != nil {
		return store.Status{}, false, err
	}
	return st, opened, nil
}

// AcquireProbe implements store.Store; a lease granted and answered is
// the one a probe of the process's next caller runs under.
func (h *handle) AcquireProbe(ctx context.Context, name, token string, epoch uint64, d time.Duration) (bool, store.Status, error) {
	var got bool
	var st store.Status
	h.w.mu.Lock()
	h.acquires[name]++
	call := h.acquires[name]
	h.w.mu.Unlock()
	var l *lease
	err := h.call(ctx, "acquire", func(m *store.Memory) string {
		got, st, _ = m.AcquireProbe(context.Background(), name, token, epoch, d)
		h.w.leaseAsked(h.proc, name, epoch, got)
		if got {
			now := h.w.now()
			l = &lease{call: call, epoch: epoch, granted: now, ends: now + d}
		}
		return fmt.Sprintf("%s epoch=%d lease=%v won=%v %s", name, epoch, d, got, h.w.status(st))
	})
	if err != nil {
		return false, store.Status{}, err
	}
	if l != nil {
		h.w.mu.Lock()
		h.won[name] = l
		h.w.mu.Unlock()
	}
	return got, st, nil
}

// leaseOf returns the lease the probe of a caller runs under, given how
// many AcquireProbe calls the handle had made before its Acquire: the
// lease its Acquire won, or nil for a probe that asked the store for none
// or got an error (a local probe, by design outside the fleet's one
// trial).
func (h *handle) leaseOf(name string, before uint64) *lease {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	if l := h.won[name]; h.acquires[name] > before && l != nil && l.call == h.acquires[name] {
		return l
	}
	return nil
}

// Resolve implements store.Store.
func (h *handle) Resolve(ctx context.Context, name, token string, epoch uint64, o classify.Outcome, reopen time.Duration, why store.Reason) (store.Status, bool, error) {
	var st store.Status
	var applied bool
	err := h.call(ctx, "resolve", func(m *store.Memory) string {
		st, applied, _ = m.Resolve(context.Background(), name, token, epoch, o, reopen, why)
		switch {
		case applied && o == classify.Success:
			h.w.recovered(name)
		case applied && o == classify.Ignore:
			h.w.givenBack(name, epoch)
		}
		return fmt.Sprintf("%s epoch=%d %v applied=%v %s", name, epoch, o, applied, h.w.status(st))
	})
	if err != nil {
		return store.Status{}, false, err
	}
	return st, applied, nil
}

// Reset implements store.Store.
func (h *handle) Reset(ctx context.Context, name string) (store.Status, error) {
	var st store.Status
	err := h.call(ctx, "reset", func(m *store.Memory) string {
		st, _ = m.Reset(context.Background(), name)
		h.w.wasReset(name)
		return fmt.Sprintf("%s %s", name, h.w.status(st))
	})
	if err != nil {
		return store.Status{}, err
	}
	return st, nil
}

// ForceOpen implements store.Store.
func (h *handle) ForceOpen(ctx context.Context, name string) (store.Status, error) {
	var st store.Status
	err := h.call(ctx, "force_open", func(m *store.Memory) string {
		st, _ = m.ForceOpen(context.Background(), name)
		h.w.forced(h.proc, name)
		return fmt.Sprintf("%s %s", name, h.w.status(st))
	})
	if err != nil {
		return store.Status{}, err
	}
	return st, nil
}

// Status implements store.Store.
func (h *handle) Status(ctx context.Context, names []string) ([]store.Status, error) {
	var out []store.Status
	// Keyed by the names read too: which reads a process makes at one
	// instant may depend on the order its goroutines run in.
	err := h.call(ctx, "status "+strings.Join(names, ","), func(m *store.Memory) string {
		out, _ = m.Status(context.Background(), names)
		s := ""
		for i, st := range out {
			s += fmt.Sprintf("%s %s; ", names[i], h.w.status(st))
		}
		return s
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Check implements store.Store: the store holds any name.
func (h *handle) Check(string) error { return nil }

package replicate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
)

// Options configure a Replicator. The zero value is valid; a negative
// duration is an error.
type Options struct {
	// Timeout bounds each call to the replica, including the wait for an
	// earlier copy of the same key to finish. A call that runs out of time
	// returns context.DeadlineExceeded, a Failure for classify.Default, so
	// timeouts trip the breaker. Zero means DefaultTimeout (1s).
	Timeout time.Duration

	// Manager is the manager the breaker is registered with. With it, the
	// replicator subscribes to the manager's events and makes its trial
	// call as soon as the breaker turns half_open. Nil means the
	// replicator has no events: while keys are pending and the breaker is
	// not closed, it looks at the breaker's state every WatchInterval.
	// New fails if Manager does not hold the breaker.
	Manager *manager.Manager

	// WatchInterval is how often the replicator looks at the breaker's
	// state when Manager is nil, while keys are pending and the breaker
	// is not closed. Zero means DefaultWatchInterval (10ms).
	WatchInterval time.Duration

	// CatchUpPause is the pause after each key catch-up sends (and after
	// each pass over the pending keys), which keeps catch-up to one call
	// at a time at a bounded rate so that live writes keep priority. Zero
	// means DefaultCatchUpPause (1ms).
	CatchUpPause time.Duration

	// RetryInterval is how long the replicator waits before it looks at
	// the pending keys again after a copy failed while the breaker stayed
	// closed (a replica that rejects some writes without tripping the
	// breaker). With a Manager it is also how often the replicator looks
	// at the breaker while keys are pending, in case an event was lost.
	// Zero means DefaultRetryInterval (1s).
	RetryInterval time.Duration

	// Logger receives the replicator's reports: panics of the Replica
	// or of the breaker's Classifier, which the replicator recovers. Nil
	// means slog.Default().
	Logger *slog.Logger
}

// Defaults for the zero fields of Options.
const (
	DefaultTimeout       = time.Second
	DefaultWatchInterval = 10 * time.Millisecond
	DefaultCatchUpPause  = time.Millisecond
	DefaultRetryInterval = time.Second
)

// eventBuffer is the buffer of the replicator's subscription to the
// manager's events.
const eventBuffer = 256

// catchUpBatch is how many pending keys catch-up reads from the primary at
// a time.
const catchUpBatch = 128

// Result says what became of the copy of one write.
type Result struct {
	// Replicated reports that the replica confirmed this write, or a newer
	// write of the same key.
	Replicated bool
	// Cause says why not: the replica's error (context.DeadlineExceeded
	// for a timeout), the breaker's *breaker.OpenError for a declined call
	// (errors.Is(Cause, breaker.ErrOpen)), manager.ErrStopped, or
	// ErrClosed. It is nil when Replicated is set.
	Cause error
}

// Alert levels raised by writes the replica did not confirm, so that the
// worker looks again: alertFailed while the breaker is closed (retry
// later), alertOpen once it is not (watch for half_open).
const (
	alertNone int32 = iota
	alertFailed
	alertOpen
)

// Replicator writes to a Primary and copies each write to a Replica through
// a breaker. Create one with New and end it with Close; all its methods are
// safe for concurrent use. It keeps one goroutine, which catches up on
// pending keys.
type Replicator struct {
	p       Primary
	rep     Replica
	b       *manager.Breaker
	timeout time.Duration
	watch   time.Duration
	pause   time.Duration
	retry   time.Duration
	log     *slog.Logger

	locks keyLocks

	// rebuilding holds a token while a Rebuild runs.
	rebuilding chan struct{}

	// Close cancels ctx, which cuts short every replica call in flight,
	// then waits for the operations counted in ops and for the worker.
	// ops counts the Put, Delete and Get calls in progress in its low
	// bits; Close sets the closing bit, and the last call to leave after
	// that closes idle.
	ctx       context.Context
	cancel    context.CancelFunc
	ops       atomic.Int64
	idle      chan struct{}
	idleOnce  sync.Once
	closeOnce sync.Once

	// The worker's inputs.
	kick        chan struct{} // a write got through while keys are pending
	alert       chan struct{} // a write did not get through
	level       atomic.Int32  // the highest alert since the worker last looked
	events      <-chan manager.Event
	unsubscribe func()
	done        chan struct{} // closed when the worker returns

	// drained is closed, and replaced, each time a confirmation leaves no
	// key pending; Wait waits on it.
	drainedMu sync.Mutex
	drained   chan struct{}
}

// New returns a Replicator that writes to p and copies each write to r
// through b, and starts its goroutine. If p holds pending keys (a primary
// reopened after a restart), catch-up starts at once.
//
// New fails, with an error that names the breaker and the field, if p, r or
// b is nil, if a duration in opts is negative, or if opts.Manager does not
// hold b. Close the Replicator before closing p.
func New(p Primary, r Replica, b *manager.Breaker, opts Options) (*Replicator, error) {
	if b == nil {
		return nil, errors.New("fusebox: replicate: New: the breaker must not be nil")
	}
	name := b.Name()
	if p == nil {
		return nil, fmt.Errorf("fusebox: replicate: breaker %q: the Primary must not be nil", name)
	}
	if r == nil {
		return nil, fmt.Errorf("fusebox: replicate: breaker %q: the Replica must not be nil", name)
	}
	durations := []struct {
		field string
		d     *time.Duration
		def   time.Duration
	}{
		{"Timeout", &opts.Timeout, DefaultTimeout},
		{"WatchInterval", &opts.WatchInterval, DefaultWatchInterval},
		{"CatchUpPause", &opts.CatchUpPause, DefaultCatchUpPause},
		{"RetryInterval", &opts.RetryInterval, DefaultRetryInterval},
	}
	for _, f := range durations {
		if *f.d < 0 {
			return nil, fmt.Errorf("fusebox: replicate: breaker %q: Options.%s must not be negative, got %v", name, f.field, *f.d)
		}
		if *f.d == 0 {
			*f.d = f.def
		}
	}
	if opts.Manager != nil {
		if held, ok := opts.Manager.Breaker(name); !ok || held != b {
			return nil, fmt.Errorf("fusebox: replicate: breaker %q: Options.Manager does not hold this breaker", name)
		}
	}

	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	rp := &Replicator{
		log:        opts.Logger,
		p:          p,
		rep:        r,
		b:          b,
		timeout:    opts.Timeout,
		watch:      opts.WatchInterval,
		pause:      opts.CatchUpPause,
		retry:      opts.RetryInterval,
		kick:       make(chan struct{}, 1),
		rebuilding: make(chan struct{}, 1),
		alert:      make(chan struct{}, 1),
		done:       make(chan struct{}),
		idle:       make(chan struct{}),
		drained:    make(chan struct{}),
	}
	rp.ctx, rp.cancel = context.WithCancel(context.Background())
	if opts.Manager != nil {
		rp.events, rp.unsubscribe = opts.Manager.Subscribe(eventBuffer)
	}
	// Decided here, not in the goroutine: a key written after New
	// returns is the live write's to send.
	go rp.run(p.PendingCount() > 0)
	return rp, nil
}

// Put stores value under key in the primary, marking the key pending in the
// same write, then copies the key's current value to the replica through
// the breaker. It returns an error only when the primary write failed (then
// nothing was written); otherwise the Result says whether the replica
// confirmed the write and, if not, why. A write the replica did not confirm
// stays pending until catch-up delivers it.
//
// The replica call is bounded by Options.Timeout and by ctx. While the
// breaker is open, Put returns as soon as the primary write is done. Put
// does not keep value. An empty key is ErrEmptyKey, a nil ctx an error
// that wraps ErrNilContext; after Close, Put returns ErrClosed. None of
// them writes anything.
func (r *Replicator) Put(ctx context.Context, key string, value []byte) (Result, error) {
	if ctx == nil {
		return Result{}, r.nilContext("Put")
	}
	if key == "" {
		return Result{}, ErrEmptyKey
	}
	if err := r.enter(); err != nil {
		return Result{}, err
	}
	defer r.leave()
	if err := r.p.Put(ctx, key, value); err != nil {
		return Result{}, fmt.Errorf("fusebox: replicate: put %q: %w", key, err)
	}
	return r.replicate(ctx, key), nil
}

// Delete removes key from the primary, marking it pending in the same
// write, and deletes it from the replica through the breaker, as Put does.
// Deleting an absent key is a write like any other. An empty key is
// ErrEmptyKey; after Close, Delete returns ErrClosed. Neither writes
// anything.
func (r *Replicator) Delete(ctx context.Context, key string) (Result, error) {
	if ctx == nil {
		return Result{}, r.nilContext("Delete")
	}
	if key == "" {
		return Result{}, ErrEmptyKey
	}
	if err := r.enter(); err != nil {
		return Result{}, err
	}
	defer r.leave()
	if err := r.p.Delete(ctx, key); err != nil {
		return Result{}, fmt.Errorf("fusebox: replicate: delete %q: %w", key, err)
	}
	return r.replicate(ctx, key), nil
}

// Get returns the value stored under key in the primary, and whether it
// exists. It never reads the replica. A nil ctx is an error that wraps
// ErrNilContext; after Close, Get returns ErrClosed.
func (r *Replicator) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if ctx == nil {
		return nil, false, r.nilContext("Get")
	}
	if err := r.enter(); err != nil {
		return nil, false, err
	}
	defer r.leave()
	v, ok, err := r.p.Get(ctx, key)
	if err != nil {
		return nil, false, fmt.Errorf("fusebox: replicate: get %q: %w", key, err)
	}
	return v, ok, nil
}

// Pending returns how many keys the replica has not confirmed yet: the
// pending marks in the primary.
func (r *Replicator) Pending() int { return r.p.PendingCount() }

// Wait returns nil once no key is pending, or ctx's error. It returns
// ErrClosed if the Replicator is closed while keys are still pending. With
// writes going on, the moment when no key is pending may never come. A
// nil ctx is an error that wraps ErrNilContext.
func (r *Replicator) Wait(ctx context.Context) error {
	if ctx == nil {
		return r.nilContext("Wait")
	}
	for {
		r.drainedMu.Lock()
		drained := r.drained
		r.drainedMu.Unlock()
		if r.p.PendingCount() == 0 {
			return nil
		}
		select {
		case <-drained:
		case <-ctx.Done():
			return ctx.Err()
		case <-r.done:
			if r.p.PendingCount() == 0 {
				return nil
			}
			return ErrClosed
		}
	}
}

// Close stops the Replicator: it cuts short the replica calls in flight
// (their keys stay pending, and the breaker does not count them as
// failures), waits for the Put, Delete and Get calls in progress to return,
// stops the goroutine and ends the subscription to the manager's events. It
// does not close the primary, the replica, the breaker or the manager.
// Afterwards Put, Delete and Get return ErrClosed. Calling Close more than
// once does nothing more; it always returns nil.
func (r *Replicator) Close() error {
	r.closeOnce.Do(func() {
		inFlight := r.ops.Add(closing) != closing
		r.cancel()
		if inFlight {
			<-r.idle
		}
		<-r.done
		if r.unsubscribe != nil {
			r.unsubscribe()
		}
	})
	return nil
}

// nilContext is the error of a method called with a nil context.
func (r *Replicator) nilContext(method string) error {
	return fmt.Errorf("fusebox: replicate: breaker %q: %s: %w", r.b.Name(), method, ErrNilContext)
}

// closing is the bit of Replicator.ops that Close sets.
const closing = 1 << 62

// enter counts an operation in progress, unless the Replicator is closed;
// leave ends it.
func (r *Replicator) enter() error {
	if r.ops.Add(1)&closing != 0 {
		r.leave()
		return ErrClosed
	}
	return nil
}

func (r *Replicator) leave() {
	if r.ops.Add(-1) == closing {
		r.idleOnce.Do(func() { close(r.idle) })
	}
}

// replicate copies key to the replica after a live write.
func (r *Replicator) replicate(ctx context.Context, key string) Result {
	// An open breaker declines without the key's lock or a context: a
	// write then costs little more than the primary write.
	if s := r.b.Snapshot(); declines(s) {
		if r.level.Load() < alertOpen {
			r.raise(alertOpen)
		}
		return Result{Cause: s.Err}
	}
	return r.replicateSlow(ctx, key)
}

// declines reports whether the breaker declines a call acquired in
// snapshot s at once, with s.Err: it is open or probing, and in service.
func declines(s *breaker.Snapshot) bool {
	return (s.State == breaker.Open || s.State == breaker.Probing) && !s.Halted
}

// replicateSlow is replicate when the breaker may let the call through.
func (r *Replicator) replicateSlow(ctx context.Context, key string) Result {
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	stop := context.AfterFunc(r.ctx, cancel)
	res, _ := r.send(cctx, key, sendLive)
	stop()
	cancel()
	switch {
	case res.Replicated:
		if r.p.PendingCount() > 0 {
			select {
			case r.kick <- struct{}{}:
			default:
			}
		}
	default:
		r.missed()
	}
	return res
}

// missed tells the worker that the replica did not take a key: to retry
// later while the breaker is closed, to watch for half_open otherwise.
func (r *Replicator) missed() {
	if r.b.State() == breaker.Closed {
		r.raise(alertFailed)
	} else {
		r.raise(alertOpen)
	}
}

// raise tells the worker that a write was not confirmed, once per level
// until the worker looks again.
func (r *Replicator) raise(level int32) {
	for {
		cur := r.level.Load()
		if cur >= level {
			return
		}
		if r.level.CompareAndSwap(cur, level) {
			select {
			case r.alert <- struct{}{}:
			default:
			}
			return
		}
	}
}

// sendMode is who sends a key, which decides how send treats the key's
// lock and a key that is not pending.
type sendMode uint8

const (
	// sendLive: a live write, which waits for the key's lock within its
	// context and sends only a pending key.
	sendLive sendMode = iota
	// sendCatchUp: catch-up, which skips a key whose lock is taken (a
	// live write is sending it) and sends only a pending key.
	sendCatchUp
	// sendRebuild: a rebuild, which waits for the lock and sends the key
	// whether it is pending or not.
	sendRebuild
)

// sendStatus says what became of a send, beyond its Result.
type sendStatus uint8

const (
	// sentNot: no call was made, and none was needed: the key's lock was
	// taken (catch-up), or the key was not pending (Result.Replicated).
	sentNot sendStatus = iota
	// sentConfirmed: the replica took the key's current state.
	sentConfirmed
	// sentDeclined: the breaker declined the call, or its manager has
	// stopped.
	sentDeclined
	// sentFailed: the replica did not take it: its error, a timeout, a
	// panic, or the wait for the key's lock ran out of time.
	sentFailed
	// sentAborted: cut short by Close, or the primary failed; it says
	// nothing about the replica.
	sentAborted
)

// send copies the current state of key (its value, or its absence as a
// delete) to the replica through the breaker, holding the key's lock, and
// clears the key's pending mark if the replica confirms and no newer write
// marked the key meanwhile. The value is read under the lock, so copies of
// a key reach the replica in write order, whoever sends them.
func (r *Replicator) send(ctx context.Context, key string, mode sendMode) (Result, sendStatus) {
	kl, err := r.locks.lock(ctx, key, mode != sendCatchUp)
	if kl == nil {
		switch {
		case err == nil:
			return Result{}, sentNot
		case r.ctx.Err() != nil:
			return Result{Cause: ErrClosed}, sentAborted
		}
		return Result{Cause: fmt.Errorf("fusebox: replicate: waiting for an earlier copy of %q: %w", key, err)}, sentFailed
	}
	defer r.locks.unlock(key, kl)

	e, err := r.p.Lookup(ctx, key)
	if err != nil {
		return Result{Cause: fmt.Errorf("fusebox: replicate: read %q from the primary: %w", key, err)}, sentAborted
	}
	if !e.Pending() && mode != sendRebuild {
		return Result{Replicated: true}, sentNot
	}
	permit, err := r.b.Acquire(ctx)
	if err != nil {
		return Result{Cause: err}, sentDeclined
	}
	panicked, err := r.call(ctx, key, e)
	switch {
	case panicked:
		// Not the classifier's to judge: a replica that panics fails.
		permit.ReleaseWith(classify.Failure, err)
		r.logPanic(key, err.(*PanicError))
		return Result{Cause: err}, sentFailed
	case err != nil && r.ctx.Err() != nil:
		// Close cut the call short: that says nothing about the
		// replica, whatever the breaker's classifier thinks of
		// context.Canceled.
		permit.ReleaseOutcome(classify.Ignore)
		return Result{Cause: ErrClosed}, sentAborted
	}
	if pe := r.release(permit, err); pe != nil {
		r.logPanic(key, pe)
		return Result{Cause: pe}, sentFailed
	}
	if err != nil {
		return Result{Cause: err}, sentFailed
	}
	if !e.Pending() {
		return Result{Replicated: true}, sentConfirmed
	}
	// The replica has the value: confirm even if ctx ends now. A failed
	// confirmation leaves the mark, and catch-up sends the key again,
	// which is harmless.
	if cleared, err := r.p.Confirm(context.WithoutCancel(ctx), key, e.Seq); err == nil && cleared {
		r.confirmed()
	}
	return Result{Replicated: true}, sentConfirmed
}

// call sends e, the current state of key, to the replica: a Put, or a
// Delete if the key is absent. A panic of the replica is recovered and
// returned as a *PanicError, with panicked set.
func (r *Replicator) call(ctx context.Context, key string, e Entry) (panicked bool, err error) {
	method := "Replica.Delete"
	if e.Found {
		method = "Replica.Put"
	}
	defer func() {
		if v := recover(); v != nil {
			panicked, err = true, &PanicError{Breaker: r.b.Name(), Func: method, Value: v, Stack: debug.Stack()}
		}
	}()
	if e.Found {
		return false, r.rep.Put(ctx, key, e.Value)
	}
	return false, r.rep.Delete(ctx, key)
}

// release reports the replica's answer err to the breaker, which
// classifies it with its Classifier. If the Classifier panics, the panic
// is recovered, the permit is released as a failure instead (exactly
// once: the panic comes before Release records anything), and release
// returns it as a *PanicError.
func (r *Replicator) release(permit manager.Permit, err error) (pe *PanicError) {
	done := false
	defer func() {
		if done {
			return
		}
		v := recover()
		permit.ReleaseWith(classify.Failure, err)
		pe = &PanicError{Breaker: r.b.Name(), Func: "Classifier", Value: v, Stack: debug.Stack()}
	}()
	permit.Release(err)
	done = true
	return nil
}

// logPanic reports a recovered panic.
func (r *Replicator) logPanic(key string, pe *PanicError) {
	r.log.Error("fusebox: replicate: recovered a panic; the key stays pending",
		"breaker", pe.Breaker, "key", key, "func", pe.Func, "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
}

// PanicError is the Result.Cause of a copy during which the Replica, or
// the breaker's Classifier, panicked. The replicator recovers the panic,
// logs it to Options.Logger, counts the call as a failure for the breaker
// and leaves the key pending: the panic reaches neither the caller of Put
// nor the replicator's goroutine.
type PanicError struct {
	// Breaker is the breaker's name.
	Breaker string
	// Func is what panicked: "Replica.Put", "Replica.Delete",
	// "Classifier", or "Lister.ListKeys" (then Rebuild returns the
	// error).
	Func string
	// Value is the value passed to panic.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("fusebox: replicate: breaker %q: %s panicked: %v", e.Breaker, e.Func, e.Value)
}

// confirmed wakes the callers of Wait if no key is pending any more.
func (r *Replicator) confirmed() {
	if r.p.PendingCount() != 0 {
		return
	}
	r.drainedMu.Lock()
	close(r.drained)
	r.drained = make(chan struct{})
	r.drainedMu.Unlock()
}

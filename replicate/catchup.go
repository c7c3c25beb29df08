package replicate

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
)

// run is the replicator's goroutine. It catches up on pending keys when
// there is reason to think the replica takes them: at start if work is set, after a write
// that got through, when the breaker turns half_open (the first send is
// then the trial call) or closed, and when its timer fires. While keys stay
// pending it keeps the timer armed, so that no key waits for a write that
// may never come.
func (r *Replicator) run(work bool) {
	defer close(r.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var due time.Time // when the timer fires; zero if it is not armed
	arm := func(d time.Duration) {
		timer.Reset(d)
		due = time.Now().Add(d)
	}

	for {
		if work {
			work = false
			r.level.Store(alertNone)
			r.catchUpGuarded()
			if r.p.PendingCount() > 0 {
				arm(r.lookAgain())
			} else {
				timer.Stop()
				due = time.Time{}
			}
			// A gap between passes, so that a stream of kicks does not
			// keep catch-up reading the primary without a pause.
			again, ok := r.sleep(r.pause)
			if !ok {
				return
			}
			if work = again; work {
				continue
			}
		}
		select {
		case <-r.ctx.Done():
			return
		case <-r.kick:
			work = true
		case <-r.alert:
			if d := r.lookAgain(); due.IsZero() || time.Until(due) > d {
				arm(d)
			}
		case ev, ok := <-r.events:
			if !ok {
				r.events = nil // the manager stopped
				continue
			}
			work = r.relevant(ev)
		case <-timer.C:
			due = time.Time{}
			work = true
		}
	}
}

// lookAgain is how long the worker waits before it looks at pending keys
// that the replica did not take.
func (r *Replicator) lookAgain() time.Duration {
	if r.events == nil && r.b.State() != breaker.Closed {
		return r.watch
	}
	return r.retry
}

// relevant reports whether ev calls for catch-up: the breaker turned
// half_open (time for a trial) or closed.
func (r *Replicator) relevant(ev manager.Event) bool {
	if ev.Name != r.b.Name() {
		return false
	}
	return ev.Transition.To == breaker.HalfOpen || ev.Transition.To == breaker.Closed
}

// sleep waits for d, reading the manager's events meanwhile so that a
// subscription never fills up while catch-up runs. It reports whether a
// relevant event came, and false for ok once the Replicator is closed.
func (r *Replicator) sleep(d time.Duration) (again, ok bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return again, false
		case <-t.C:
			return again, true
		case ev, open := <-r.events:
			if !open {
				r.events = nil
				continue
			}
			again = again || r.relevant(ev)
		}
	}
}

// catchUpGuarded is catchUp with a panic recovered (of the Primary: those
// of the Replica and of the Classifier are recovered around the call) and
// logged, so that it does not end the process: the keys stay pending, and
// the worker looks at them again after RetryInterval.
func (r *Replicator) catchUpGuarded() {
	defer func() {
		if v := recover(); v != nil {
			r.log.Error("fusebox: replicate: recovered a panic in catch-up; the keys stay pending",
				"breaker", r.b.Name(), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
	}()
	r.catchUp()
}

// catchUp sends the current value of every pending key to the replica,
// pass after pass, until no key is pending, or a pass confirmed nothing or
// had to stop.
func (r *Replicator) catchUp() {
	for r.p.PendingCount() > 0 {
		progress, more := r.pass()
		if !progress || !more {
			return
		}
	}
}

// pass goes once through the pending keys, in key order, one send at a
// time with a pause after each. It skips keys whose lock a live write
// holds: that write is sending the key. It reports whether the replica
// confirmed any key, and whether another pass may help: not if the breaker
// declined a call, a send failed, the primary failed, or the Replicator is
// closing.
func (r *Replicator) pass() (progress, more bool) {
	more = true
	after := ""
	for {
		keys, err := r.p.PendingKeys(r.ctx, after, catchUpBatch)
		if err != nil || len(keys) == 0 {
			return progress, more && err == nil
		}
		for _, key := range keys {
			after = key
			if r.ctx.Err() != nil || declines(r.b.Snapshot()) {
				return progress, false
			}
			res, status := r.sendPending(key)
			if status == sentNot {
				continue
			}
			if res.Replicated {
				progress = true
			} else {
				more = false
			}
			if !r.sleepKeepingEvents(r.pause) {
				return progress, false
			}
		}
	}
}

// sendPending is send for catch-up: bounded by the timeout and cut short by
// Close, and never waiting for a key's lock.
func (r *Replicator) sendPending(key string) (Result, sendStatus) {
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	return r.send(ctx, key, sendCatchUp)
}

// sleepKeepingEvents is sleep inside a pass: a relevant event seen there
// becomes a kick, so that the worker runs catch-up again after this pass.
// It reports false once the Replicator is closed.
func (r *Replicator) sleepKeepingEvents(d time.Duration) bool {
	again, ok := r.sleep(d)
	if again {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
	return ok
}

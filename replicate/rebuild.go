package replicate

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"
)

// rebuildBatch is how many keys Rebuild reads at a time, from the primary
// and from a Lister replica, and how many keys it deals with between two
// records of its progress: a rebuild resumed after a crash sends at most
// this many keys again.
const rebuildBatch = 128

// Rebuild sends the replica every key of the primary, for a replica that
// is new, empty, or lost its data: the current value of each key, in key
// order, one key at a time with Options.CatchUpPause after each, each call
// through the breaker and bounded by Options.Timeout. If the Replica is a
// Lister, Rebuild also deletes from it every key it holds that the primary
// does not; otherwise those stay (see Lister).
//
// Rebuild does not block live writes, and it keeps each key's order: it
// sends a key under the key's lock, as live writes and catch-up do, with
// the value the primary holds at that moment. A key it sends while it is
// pending has its mark cleared, as catch-up would. A key the replica does
// not take (an error, a timeout) is marked pending, so that catch-up
// delivers it as it delivers a live write the replica missed, and the
// rebuild goes on.
//
// Rebuild records its progress in the primary (see Progress) at the start,
// every 128 keys and when it stops. It stops, and returns an error, when
// the breaker declines a call (the error wraps the *breaker.OpenError:
// errors.Is(err, breaker.ErrOpen)), when the primary or a Lister fails,
// when ctx is done (ctx's error) or on Close (ErrClosed). Calling Rebuild
// again, in this process or in another one after a restart or a crash,
// goes on after the last key recorded, and the primary's RebuildProgress
// tells whether a rebuild is unfinished. Once every key has been dealt
// with, Rebuild records that no rebuild is running and returns nil; the
// next call starts from the first key again.
//
// Calls of Rebuild run one at a time: a second call waits for the first to
// return, then resumes or starts a rebuild of its own. A nil ctx is an
// error that wraps ErrNilContext.
func (r *Replicator) Rebuild(ctx context.Context) error {
	if ctx == nil {
		return r.nilContext("Rebuild")
	}
	if err := r.enter(); err != nil {
		return err
	}
	defer r.leave()
	select {
	case r.rebuilding <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-r.ctx.Done():
		return ErrClosed
	}
	defer func() { <-r.rebuilding }()

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(r.ctx, cancel)
	defer stop()
	err := r.rebuild(rctx)
	switch {
	case err == nil:
		return nil
	case r.ctx.Err() != nil:
		return ErrClosed
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return err
}

// rebuild is Rebuild's walk over the keys of the primary and, with a
// Lister, of the replica, merged in key order.
func (r *Replicator) rebuild(ctx context.Context) error {
	name := r.b.Name()
	prog, err := r.p.RebuildProgress(ctx)
	if err != nil {
		return fmt.Errorf("fusebox: replicate: breaker %q: rebuild: read its progress from the primary: %w", name, err)
	}
	if !prog.Running {
		prog = Progress{Running: true}
		if err := r.p.SetRebuildProgress(ctx, prog); err != nil {
			return fmt.Errorf("fusebox: replicate: breaker %q: rebuild: record its start in the primary: %w", name, err)
		}
	}
	primary := &keyCursor{list: r.p.Keys, after: prog.After, what: "the primary"}
	var replica *keyCursor
	if l, ok := r.rep.(Lister); ok {
		replica = &keyCursor{list: r.boundedList(l), after: prog.After, what: "the replica"}
	}

	unsaved := 0
	save := func() error {
		if unsaved == 0 {
			return nil
		}
		unsaved = 0
		// Recorded even when ctx is what stopped the rebuild.
		if err := r.p.SetRebuildProgress(context.WithoutCancel(ctx), prog); err != nil {
			return fmt.Errorf("fusebox: replicate: breaker %q: rebuild: record its progress in the primary: %w", name, err)
		}
		return nil
	}
	stopped := func(err error) error {
		if serr := save(); serr != nil && err == nil {
			return serr
		}
		return err
	}
	for {
		key, ok, err := nextKey(ctx, primary, replica)
		if err != nil {
			return stopped(fmt.Errorf("fusebox: replicate: breaker %q: rebuild: %w", name, err))
		}
		if !ok {
			break
		}
		if err := r.rebuildKey(ctx, key); err != nil {
			return stopped(err)
		}
		prog.After = key
		if unsaved++; unsaved >= rebuildBatch {
			if err := save(); err != nil {
				return err
			}
		}
		if !pause(ctx, r.pause) {
			return stopped(ctx.Err())
		}
	}
	if err := r.p.SetRebuildProgress(context.WithoutCancel(ctx), Progress{}); err != nil {
		return fmt.Errorf("fusebox: replicate: breaker %q: rebuild: record its end in the primary: %w", name, err)
	}
	return nil
}

// rebuildKey sends key's current state to the replica. It returns nil once
// the key is dealt with: sent, or handed to catch-up with a pending mark.
func (r *Replicator) rebuildKey(ctx context.Context, key string) error {
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	res, status := r.send(cctx, key, sendRebuild)
	cancel()
	switch status {
	case sentDeclined:
		r.raise(alertOpen) // so that catch-up watches for half_open
		return fmt.Errorf("fusebox: replicate: breaker %q: rebuild stopped before %q: %w", r.b.Name(), key, res.Cause)
	case sentAborted:
		return res.Cause
	case sentFailed:
		if ctx.Err() != nil {
			return ctx.Err() // cut short: the key was not dealt with
		}
		if err := r.p.Mark(context.WithoutCancel(ctx), key); err != nil {
			return fmt.Errorf("fusebox: replicate: breaker %q: rebuild: mark %q pending in the primary: %w", r.b.Name(), key, err)
		}
		r.missed()
	}
	return nil
}

// boundedList is l.ListKeys bounded by Options.Timeout, with a panic
// recovered and returned as a *PanicError.
func (r *Replicator) boundedList(l Lister) func(context.Context, string, int) ([]string, error) {
	return func(ctx context.Context, after string, limit int) (keys []string, err error) {
		ctx, cancel := context.WithTimeout(ctx, r.timeout)
		defer cancel()
		defer func() {
			if v := recover(); v != nil {
				keys, err = nil, &PanicError{Breaker: r.b.Name(), Func: "Lister.ListKeys", Value: v, Stack: debug.Stack()}
			}
		}()
		return l.ListKeys(ctx, after, limit)
	}
}

// keyCursor walks the keys of a listing in order, rebuildBatch at a time.
type keyCursor struct {
	list  func(ctx context.Context, after string, limit int) ([]string, error)
	what  string // for errors
	after string // the last key read
	buf   []string
	done  bool
}

// peek returns the cursor's next key, without moving past it; ok is false
// at the end. A nil cursor is at its end.
func (c *keyCursor) peek(ctx context.Context) (key string, ok bool, err error) {
	if c == nil {
		return "", false, nil
	}
	for len(c.buf) == 0 && !c.done {
		keys, err := c.list(ctx, c.after, rebuildBatch)
		if err != nil {
			return "", false, fmt.Errorf("list the keys of %s after %q: %w", c.what, c.after, err)
		}
		// Only keys past the last one count, so that a listing that
		// repeats itself ends the walk instead of looping.
		for _, k := range keys {
			if k > c.after {
				c.buf = append(c.buf, k)
				c.after = k
			}
		}
		c.done = len(c.buf) == 0
	}
	if len(c.buf) == 0 {
		return "", false, nil
	}
	return c.buf[0], true, nil
}

func (c *keyCursor) pop() { c.buf = c.buf[1:] }

// nextKey returns the smallest next key of the two cursors and moves both
// past it.
func nextKey(ctx context.Context, a, b *keyCursor) (string, bool, error) {
	ka, okA, err := a.peek(ctx)
	if err != nil {
		return "", false, err
	}
	kb, okB, err := b.peek(ctx)
	if err != nil {
		return "", false, err
	}
	switch {
	case okA && (!okB || ka <= kb):
		a.pop()
		if okB && kb == ka {
			b.pop()
		}
		return ka, true, nil
	case okB:
		b.pop()
		return kb, true, nil
	}
	return "", false, nil
}

// pause waits d, or until ctx is done; it reports false in that case.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

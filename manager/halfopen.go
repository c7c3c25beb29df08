package manager

import (
	"context"
	"errors"
	"fmt"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/fleet"
	"github.com/fusebox-go/fusebox/internal/machine"
	"github.com/fusebox-go/fusebox/store"
)

// HalfOpen ends the breaker's open period now: the next call is the probe,
// and its verdict (a success closes, with the slow start of
// Config.SlowStart after it; a failure opens for the period Recover
// decides) follows as after the period's timer. Use it to let one trial
// through once the dependency is believed healthy, instead of Reset,
// which lets every call through at once and skips the slow start.
//
// It returns an error that names the breaker and says why when the
// breaker is not open: closed, half-open already or probing (the next
// call, or the one in flight, is the probe), or forced open (ForceOpen):
// a forcing is lifted only by Reset, never by HalfOpen. It returns
// ErrRemoved once the breaker is removed and ErrStopped once the manager
// has stopped.
//
// A shared breaker (Config.Store) is half-opened in the store first, for
// every process that shares it: one store round trip on the caller's
// goroutine, bounded by Options.StoreTimeout, after which every process
// turns half-open as it hears of it, and the store's probe lease lets
// exactly one of them make the trial for the fleet. The store must
// implement store.HalfOpener (store.Memory and redisstore do); HalfOpen
// of a breaker whose store does not is an error that says so. If the store
// cannot be reached, only this process's breaker turns half-open and it
// falls back (see Config.Fallback); failing closed, nothing changes and
// the error says so. A breaker open in its process alone (Config.Quorum)
// turns half-open in its process alone.
func (b *Breaker) HalfOpen() error {
	if s := b.mach.Snapshot(); s.Halted {
		return b.haltedErr(s)
	}
	err := b.truth.halfOpen(b)
	if s := b.mach.Snapshot(); s.Halted {
		return b.haltedErr(s)
	}
	return err
}

// halfOpen ends the open period of the machine here, by hand.
func (b *Breaker) halfOpen() error {
	for {
		s := b.mach.Snapshot()
		step, cur, ok := b.mach.HalfOpen(s.Gen, b.mgr.clk.Now())
		if ok {
			b.mgr.notify(b, step)
			return nil
		}
		if cur.Gen == s.Gen {
			return b.notHalfOpened(cur)
		}
		// The machine moved meanwhile (a timer, a call): look again.
	}
}

// Why HalfOpen refuses.
var (
	errHalfOpenClosed   = errors.New("the breaker is closed, not open: there is no open period to end")
	errHalfOpenAlready  = errors.New("the breaker is half_open already: its next call is the probe")
	errHalfOpenProbing  = errors.New("the breaker is probing: a probe is in flight, and its verdict decides")
	errHalfOpenForced   = errors.New("the breaker is forced open (ForceOpen): only Reset lifts a forcing")
	errHalfOpenFailShut = errors.New("the store cannot be reached and the breaker fails closed (store.FailClosed): only the store's answer, or Reset, lets a call through")
)

// notHalfOpened is HalfOpen's error for a breaker in snapshot s, which is
// not open, or forced; nil for one open.
func (b *Breaker) notHalfOpened(s *machine.Snapshot) error {
	var why error
	switch {
	case s.Halted:
		return b.haltedErr(s)
	case s.Forced:
		why = errHalfOpenForced
	case s.State == breaker.Closed:
		why = errHalfOpenClosed
	case s.State == breaker.HalfOpen:
		why = errHalfOpenAlready
	case s.State == breaker.Probing:
		why = errHalfOpenProbing
	default:
		return nil
	}
	return b.misuse("HalfOpen", why)
}

// halfOpen implements truth: HalfOpen in the store first, for every
// process, then here; see Breaker.HalfOpen.
func (sh *shared) halfOpen(b *Breaker) error {
	ho, ok := sh.st.(store.HalfOpener)
	if !ok {
		return b.misuse("HalfOpen", fmt.Errorf("store %T cannot end an open period for the fleet: it does not implement store.HalfOpener", sh.st))
	}
	before := b.mach.Snapshot()
	a, notes := sh.step(fleet.HalfOpenAsked{}, nil)
	sh.handOver(a, notes)
	call, ok := a.Call.(fleet.HalfOpenCall)
	if !ok {
		return sh.halfOpened(b, before, notes, nil)
	}
	var st store.Status
	var applied bool
	err := sh.call(func(ctx context.Context) (err error) {
		st, applied, err = ho.HalfOpen(ctx, b.Name(), call.Epoch)
		return err
	})
	a, notes = sh.step(fleet.HalfOpenReply{Applied: applied, Status: st, Err: err, At: b.mgr.clk.Now()}, nil)
	sh.handOver(a, notes)
	switch {
	case err == nil && !applied:
		return sh.refused(b, st, call.Epoch)
	case err == nil:
		// The store ended the period for the fleet. This process
		// follows it by the reply's step, or did already by the change
		// the store announced, which its watch may deliver first.
		return nil
	}
	return sh.halfOpened(b, before, notes, err)
}

// halfOpened is HalfOpen's answer once the step ran: nil if the machine
// turned half-open by hand (a note of it is among notes), or why not,
// from the snapshot it was in; storeErr is the store call's error, if it
// failed.
func (sh *shared) halfOpened(b *Breaker, before *machine.Snapshot, notes []note, storeErr error) error {
	for _, n := range notes {
		if n.step.Cause == breaker.CauseHalfOpen {
			return nil
		}
	}
	s := b.mach.Snapshot()
	if err := b.notHalfOpened(s); err != nil {
		return err
	}
	if sh.state.Link.Down && sh.fallback == store.FailClosed {
		return b.misuse("HalfOpen", errHalfOpenFailShut)
	}
	if storeErr != nil {
		return b.misuse("HalfOpen", fmt.Errorf("the store did not answer: %w", storeErr))
	}
	return b.misuse("HalfOpen", fmt.Errorf("the breaker changed meanwhile (from %v, generation %d, to %v, generation %d): look, and ask again", before.State, before.Gen, s.State, s.Gen))
}

// refused is HalfOpen's error when the store refused to end the period of
// epoch: its status st says why.
func (sh *shared) refused(b *Breaker, st store.Status, epoch uint64) error {
	var why error
	switch {
	case !st.Opened():
		why = errHalfOpenClosed
	case st.Forced:
		why = errHalfOpenForced
	case st.Epoch != epoch:
		why = fmt.Errorf("the fleet moved on (epoch %d, this process knew %d): look, and ask again", st.Epoch, epoch)
	case st.Probe > 0:
		why = fmt.Errorf("%w (the lease has %v left)", errHalfOpenProbing, st.Probe)
	default:
		why = errHalfOpenAlready
	}
	return b.misuse("HalfOpen", fmt.Errorf("in the store, %w", why))
}

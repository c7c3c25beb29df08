package fleet

import (
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/store"
)

// Mirror is what a process knows of a shared breaker: the state its local
// copy is in, the epoch that state belongs to, when its timer ends, whether
// it is forced open, and whether this process holds the probe lease.
type Mirror struct {
	State  breaker.State
	Epoch  uint64
	Until  time.Time // the end of the state's timer; zero: none
	Forced bool      // forced open until a Reset (State is Open)
	Holder bool      // this process holds the probe lease of Epoch
	// SlowUntil, closed, is the end of the fleet's slow start after a
	// recovery (store.Status.SlowStart); zero: none.
	SlowUntil time.Time
}

// Tolerance is how far a mirrored deadline may be from the store's before
// Follow corrects it: replies take time, and each correction is a
// transition-free but visible change.
const Tolerance = 25 * time.Millisecond

// Follow is the rule a mirror follows: given what it knows (m), a status of
// the store (st, or a change as StatusOf gives it) asked for at at,
// and now, it returns the mirror's next state and whether it changes. It is
// a pure function: the manager applies its answer.
//
//   - A status of an older epoch is out of date (a late reply, a late
//     message) or the store lost its data: it changes nothing, and the
//     mirror keeps to its own deadlines.
//   - A status of a newer epoch is adopted whole: closed for an even
//     epoch, with the fleet's slow start if a recovery began one (it ends
//     at at+SlowStart, so a mirror that hears late joins it where it
//     stands); for an odd one, open until at+Open, probing until at+Probe
//     (another process's lease), or half-open. A close the mirror missed
//     is learnt this way.
//   - A status of the mirror's own epoch corrects it within the epoch: an
//     open period's end, a lease another process took or gave back. A
//     closed epoch changes nothing for a mirror closed or open in it (an
//     open one has tripped and its opening is on its way to the store);
//     one half-open or probing in it opened on its own while the store was
//     unreachable, and closes with the fleet. Likewise a mirror closed on
//     its own in an opened epoch follows the fleet's state.
//   - A forced opening (ForceOpen) is followed at once, whatever the
//     mirror's state; only a newer epoch (a Reset) lifts a forced mirror,
//     which so keeps a forcing of its own (made while the store was
//     unreachable) until the fleet moves on.
//
// A state whose time is over by now is followed by the state after it:
// open by half-open, another's probe by half-open.
func Follow(m Mirror, st store.Status, at, now time.Time) (Mirror, bool) {
	switch {
	case st.Epoch < m.Epoch:
		return m, false
	case st.Epoch > m.Epoch:
		return moved(m, described(st, at, now), true)
	case m.Forced:
		return m, false
	case !st.Opened():
		// A mirror open in its own closed epoch tripped, and its opening
		// is on its way to the store. Past open, none is coming (it
		// opened on its own while the store was unreachable): the fleet
		// is closed.
		if m.State == breaker.Open || m.State == breaker.Closed {
			return m, false
		}
		return moved(m, described(st, at, now), true)
	}
	want := described(st, at, now)
	switch want.State {
	case breaker.Open:
		if want.Forced {
			break
		}
		if m.State == breaker.Open && m.Until.Sub(want.Until).Abs() <= Tolerance {
			return m, false
		}
		if m.State == breaker.Probing && m.Holder {
			return m, false
		}
	case breaker.Probing:
		if m.Holder || m.State == breaker.Open && m.Until.After(now) {
			return m, false
		}
		if m.State == breaker.Probing && m.Until.Sub(want.Until).Abs() <= Tolerance {
			return m, false
		}
	case breaker.HalfOpen:
		// The open period is over in the store and no lease is held.
		// A mirror still open keeps to its own deadline (it is close);
		// one probing for another process whose lease ended is not, nor
		// one closed on its own (while the store was unreachable) in an
		// opened epoch: a probe through the store decides.
		if m.State != breaker.Probing && m.State != breaker.Closed || m.Holder {
			return m, false
		}
	}
	return moved(m, want, false)
}

// described returns the state the status describes, as a mirror at now.
func described(st store.Status, at, now time.Time) Mirror {
	f := Mirror{Epoch: st.Epoch}
	switch {
	case !st.Opened():
		f.State = breaker.Closed
		if st.SlowStart > 0 && at.Add(st.SlowStart).After(now) {
			f.SlowUntil = at.Add(st.SlowStart)
		}
	case st.Forced:
		f.State, f.Forced = breaker.Open, true
	case st.Open > 0 && at.Add(st.Open).After(now):
		f.State, f.Until = breaker.Open, at.Add(st.Open)
	case st.Probe > 0 && at.Add(st.Probe).After(now):
		f.State, f.Until = breaker.Probing, at.Add(st.Probe)
	default:
		f.State = breaker.HalfOpen
	}
	return f
}

func moved(m, to Mirror, newEpoch bool) (Mirror, bool) {
	if newEpoch {
		to.Holder = false
	}
	return to, to != m
}

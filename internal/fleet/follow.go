package fleet

import (
	"hash/fnv"
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
	// Self is this process's name (manager.Options.Name), and Lag how
	// long after the store's deadlines it acts on them (see Lag): the
	// mirror's own settings, which Follow keeps.
	Self string
	Lag  time.Duration
}

// Lag returns how long after the end of another process's opening, or of
// a lease, the process named self turns half-open and may ask for the
// lease: from 100ms to 130ms, drawn from the name, so that the processes of
// a fleet are spread over 30ms; zero for an empty name.
// The process that opened the epoch (store.Reason.By) acts on the end of
// its open period without a lag: as the period ends it asks for the
// lease, which the store announces (a Leased change), and the others hear
// of it before their own lag is over and ask for none. So a period end
// costs one lease, however many processes call the breaker; if the opener
// does not call, or died, the first of the others asks, and the rest hear
// of its lease; so too when a lease runs out without a verdict. Lag is
// above Tolerance so that a process whose own trip set its deadline is
// corrected to its lag by the first status it hears, and long enough for
// a change to reach a loaded process: at 30 to 60ms, 100 managers in 25
// processes on 2 cores asked for 4.5 to 55 leases per period end (their
// processes waited that long for a core); at 100 to 130ms, 1 to 1.5.
func Lag(self string) time.Duration {
	if self == "" {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(self))
	return MaxLag - 30*time.Millisecond + time.Duration(h.Sum32()%30000)*time.Microsecond
}

// MaxLag bounds Lag: every process of a fleet is half-open MaxLag after
// the open period's end at the latest.
const MaxLag = 130 * time.Millisecond

// Tolerance is how far a mirrored deadline may be from the store's before
// Follow corrects it: replies take time, and each correction is a
// transition-free but visible change.
const Tolerance = 25 * time.Millisecond

// Follow is the rule a mirror follows: given what it knows (m), a status of
// the store (st, or a change as StatusOf gives it) answered or heard at at
// (its durations count from there: the store counted them from an instant
// before, so a mirror's deadline is never earlier than the store's),
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
//     (another process's lease), or half-open. Those deadlines are later
//     by the mirror's Lag: a lease's end always, an open period's end
//     unless the mirror's process opened the epoch. A close the mirror
//     missed is learnt this way.
//   - A status of the mirror's own epoch corrects it within the epoch: an
//     open period's end, a lease another process took (followed by a
//     mirror still open too: the store's period is over) or gave back
//     (followed its Lag later, as a lease's end). A
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
		return moved(m, described(m, st, at, now), true)
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
		return moved(m, described(m, st, at, now), true)
	}
	want := described(m, st, at, now)
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
		if m.Holder {
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
		if m.State == breaker.Probing {
			// Another process's lease is over in the store: the
			// mirror turns half-open its Lag after it heard so, or at
			// the end it took from the lease if sooner. A lease given
			// back (a probe released as ignored) so costs one request:
			// the process that gave it back is half-open at once, asks
			// first, and the others hear of its lease (defect 11).
			end := at.Add(m.Lag)
			if m.Until.Before(end) {
				end = m.Until
			}
			if end.After(now) {
				if m.Until.Sub(end).Abs() <= Tolerance {
					return m, false
				}
				want.State, want.Until = breaker.Probing, end
			}
		}
	}
	return moved(m, want, false)
}

// described returns the state the status describes, as mirror m would be
// at now: the end of another's lease later by m's Lag, and so the end of
// the open period, unless m's process opened the epoch.
func described(m Mirror, st store.Status, at, now time.Time) Mirror {
	f := Mirror{Epoch: st.Epoch, Self: m.Self, Lag: m.Lag}
	lag := m.Lag
	if st.Reason.By == m.Self && st.Probe == 0 {
		lag = 0
	}
	switch {
	case !st.Opened():
		f.State = breaker.Closed
		if st.SlowStart > 0 && at.Add(st.SlowStart).After(now) {
			f.SlowUntil = at.Add(st.SlowStart)
		}
	case st.Forced:
		f.State, f.Forced = breaker.Open, true
	case st.Open > 0 && at.Add(st.Open+lag).After(now):
		f.State, f.Until = breaker.Open, at.Add(st.Open+lag)
	case st.Probe > 0 && at.Add(st.Probe+lag).After(now):
		f.State, f.Until = breaker.Probing, at.Add(st.Probe+lag)
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

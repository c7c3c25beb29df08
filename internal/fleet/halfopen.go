package fleet

import (
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/store"
)

// HalfOpenAsked says a caller asks to end the breaker's open period by
// hand (manager.Breaker.HalfOpen), the machine being open, not forced.
type HalfOpenAsked struct{}

// HalfOpenReply is the store's answer to a HalfOpenCall: whether it ended
// the period (Applied), the status it left, or the call's error, answered
// at At.
type HalfOpenReply struct {
	Applied bool
	Status  store.Status
	Err     error
	At      time.Time
}

// HalfOpenCall ends the open period of the opened epoch Epoch in the
// store, for the fleet (store.HalfOpener). Its reply is a HalfOpenReply.
type HalfOpenCall struct{ Epoch uint64 }

// HalfOpen ends the open period of the open generation Gen of the
// machine by hand (machine.Machine.HalfOpen).
type HalfOpen struct{ Gen uint64 }

func (HalfOpenAsked) isMsg() {}
func (HalfOpenReply) isMsg() {}
func (HalfOpenCall) isCall() {}
func (HalfOpen) isChange()   {}

// halfOpenAsked decides how a HalfOpen by hand is made: through the store,
// for the fleet; here alone for a breaker open alone (its own period) or
// while the store is unreachable (as ForceOpen and Reset are then); not at
// all while failing closed, when only the store's answer lets a call
// through, nor while a forcing is on its way, nor for a machine that is
// not open, or forced (the caller says why).
func (s *State) halfOpenAsked(v View, a *Actions) {
	switch {
	case v.Halted || v.State != breaker.Open || v.Forced || s.Force == ForceSending || s.failsClosed():
	case s.Link.Down || s.Trip.Kind == TripAlone:
		a.Change = HalfOpen{Gen: v.Gen}
	default:
		a.Call = HalfOpenCall{Epoch: s.Epoch}
	}
}

// halfOpenReply takes the store's answer to a HalfOpenCall. Applied, the
// machine turns half-open here at once, in the store's new epoch; the
// change the store announces is this process's own and moves nothing
// more. Refused, the breaker follows what the store says. The store
// unreachable, the breaker falls back and, unless that holds it open,
// turns half-open here alone.
func (s *State) halfOpenReply(v View, now time.Time, m HalfOpenReply, a *Actions) {
	open := v.State == breaker.Open && !v.Forced && !v.Halted
	switch {
	case m.Err != nil:
		s.fallBack(v, m.Err, a)
		if a.Change == nil && open && !s.failsClosed() {
			a.Change = HalfOpen{Gen: v.Gen}
		}
	case m.Applied && open && s.Force != ForceSending:
		s.raise(v, m.Status.Epoch)
		if s.Probe.Kind == ProbeHeld {
			s.Probe = Probe{}
		}
		if s.Trip.Kind == TripAlone {
			s.Trip = OwnTrip{}
		}
		a.Change = HalfOpen{Gen: v.Gen}
	default:
		s.hear(v, now, Heard{Status: m.Status, At: m.At}, a)
	}
}

package manager

import (
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/machine"
	"github.com/fusebox-go/fusebox/internal/reasontext"
)

// Stats are a breaker's counters and state at one moment. The counters
// start at zero when the breaker is registered and only grow.
type Stats struct {
	// Name is the breaker's name.
	Name string
	// State is the current state, entered at Since. It is breaker.Halted
	// once the manager has halted after too many panics in callbacks.
	State breaker.State
	Since time.Time
	// Until is when the current open period or probe time ends; zero if
	// there is none or it is not known yet.
	Until time.Time
	// Forced is set while the breaker is forced open.
	Forced bool
	// Removed is set once Manager.Remove removed the breaker: State is then
	// the state it was in, and the counters stay as they were.
	Removed bool
	// Admitted is the share of calls, from 0 to 1, that the breaker lets
	// through now: 1 while it is closed, except in a slow start after a
	// recovery (Config.SlowStart), where it grows linearly from 0 to 1;
	// 0 while it is open, half_open (but for its one probe) or probing,
	// and once it is out of service, unless its halted manager lets calls
	// through unprotected (Options.FailOpen): 1 then.
	Admitted float64
	// SlowStartUntil, while a slow start runs, is when it ends: when
	// Admitted reaches 1. It is zero otherwise.
	SlowStartUntil time.Time
	// Cause and OpenedBy say why the breaker is open, half-open or
	// probing (Event.Err of the opening): Cause is the text of the error
	// of the call that opened it, on one line and at most 200 bytes;
	// OpenedBy, for a shared breaker, the name of the process that opened
	// it (Options.Name: this process's own for an opening it made). Both
	// are empty while the breaker is closed or forced open; Cause is
	// empty too when that call returned no error.
	Cause, OpenedBy string

	// Calls is every call that asked for a permit and has finished: the
	// sum of Successes, Failures, Ignored and Declined. Calls still in
	// flight are not in it.
	Calls uint64
	// Successes, Failures and Ignored count released calls by outcome,
	// stale ones included.
	Successes, Failures, Ignored uint64
	// Declined counts calls refused by an open or probing breaker, and by
	// a slow start.
	Declined uint64
	// DryRun is set while the breaker is in a dry run (Config.DryRun).
	DryRun bool
	// WouldDecline counts, for a breaker in a dry run (Config.DryRun),
	// the calls it let through that it would have declined: what
	// Declined would have counted. They are not in Declined; their
	// outcomes count in Successes, Failures and Ignored, and change
	// nothing else.
	WouldDecline uint64
	// Stale counts releases of permits granted before the breaker last
	// changed state; they changed nothing but these counters.
	Stale uint64
	// SlowCalls counts released calls that took at least Config.SlowCall
	// and so counted as failures, whatever they returned; each is also in
	// Failures.
	SlowCalls uint64
	// Unprotected counts the calls let through without protection once
	// the manager had halted, with Options.FailOpen. Their outcomes count
	// in Successes, Failures and Ignored, as any call's.
	Unprotected uint64
	// DroppedEvents counts this breaker's events that a subscriber lost
	// because its buffer was full (once per subscriber that lost it).
	DroppedEvents uint64

	// Windowed is set for a strategy that keeps a window of recent calls
	// (breaker.FailureRate, breaker.TimeWindow). WindowCalls and
	// WindowFailures are then the calls and failures in it: of the current
	// closed period or, while the breaker is not closed, of the closed
	// period that ended when it opened. Without a window both are zero.
	Windowed                    bool
	WindowCalls, WindowFailures uint64

	// Durations is the histogram of the durations of released calls,
	// for a breaker registered with Config.TimeCalls; nil otherwise.
	Durations *Durations

	// Shared is set for a breaker shared through a store (Config.Store).
	Shared bool
	// StoreDown is set while the store cannot be reached and the
	// breaker's Fallback is in effect.
	StoreDown bool
	// StoreErrors counts the store calls of this breaker that failed: its
	// own, and each status read or watch of its store that failed.
	StoreErrors uint64
	// Processes, for a shared breaker with Config.Quorum above 1, is how
	// many processes reported the failures the fleet's count holds, as the
	// store last said; zero otherwise.
	Processes int64
}

// admitted is Stats.Admitted and Stats.SlowStartUntil for snapshot s.
func (b *Breaker) admitted(s *machine.Snapshot) (float64, time.Time) {
	if s.Halted && !s.Removed && b.mgr.failingOpen.Load() {
		return 1, time.Time{}
	}
	if s.SlowStart == nil {
		return s.Admitted(), time.Time{}
	}
	return s.Admitted(), s.SlowStart.Until
}

// Stats returns the breaker's counters and state. The counters are read one
// after another while calls go on, so under load they may be a few calls
// apart from one another.
func (b *Breaker) Stats() Stats {
	s := b.mach.Snapshot()
	st := Stats{
		Name:          b.Name(),
		State:         b.mgr.reported(s),
		Since:         s.Since,
		Until:         s.Until,
		Forced:        s.Forced,
		Removed:       s.Removed,
		Successes:     b.stats.Load(statSuccess),
		Failures:      b.stats.Load(statFailure),
		Ignored:       b.stats.Load(statIgnore),
		Declined:      b.stats.Load(statDeclined),
		WouldDecline:  b.stats.Load(statWouldDecline),
		DryRun:        b.dryRun.Load(),
		Stale:         b.stats.Load(statStale),
		SlowCalls:     b.stats.Load(statSlow),
		Unprotected:   b.stats.Load(statUnprotected),
		DroppedEvents: b.dropped.Load(),
	}
	if s.Err != nil && !s.Forced {
		switch c := s.Err.Cause.(type) {
		case nil:
		case *breaker.OpenedError:
			st.OpenedBy, st.Cause = c.By, c.Text
		default:
			st.Cause = reasontext.Line(c.Error(), reasontext.Max)
		}
	}
	st.Calls = st.Successes + st.Failures + st.Ignored + st.Declined
	st.Admitted, st.SlowStartUntil = b.admitted(s)
	var now time.Time
	if b.mach.UsesClock() {
		now = b.mgr.clk.Now()
	}
	st.WindowCalls, st.WindowFailures, st.Windowed = b.mach.Window(now)
	if h := b.durations.Load(); h != nil {
		st.Durations = h.read()
	}
	if sh := b.fleet(); sh != nil {
		st = sh.link(st)
	}
	return st
}

package dashboard

import (
	"time"

	"github.com/fusebox-go/fusebox/internal/reasontext"
	"github.com/fusebox-go/fusebox/manager"
)

// Status is what the page shows, as served by /api/status and in each event
// of /api/events.
type Status struct {
	// Title is Options.Title.
	Title string `json:"title"`
	// Now is the manager's clock when the status was taken: the page
	// measures ages and the timeline from it.
	Now time.Time `json:"now"`
	// Actions reports whether the force-open and reset actions are served.
	Actions bool `json:"actions"`
	// Process is the manager's process name (manager.Options.Name): the
	// name other processes of a fleet know it by.
	Process string `json:"process"`
	// Halted is set once the manager has stopped: halted after a burst of
	// restarts, or stopped. Its breakers then refuse every call.
	Halted bool `json:"halted,omitempty"`
	// Breakers lists every breaker of the manager in the order they were
	// registered.
	Breakers []BreakerStatus `json:"breakers"`
}

// BreakerStatus is one breaker's state, counters and recent transitions.
type BreakerStatus struct {
	// Name is the breaker's name, as registered.
	Name string `json:"name"`
	// State is the breaker's state: "closed", "open", "half_open" or
	// "probing".
	State string `json:"state"`
	// Since is when the breaker entered State.
	Since time.Time `json:"since"`
	// Until is when the open period or the probe's time ends; absent when
	// there is none or it is not known yet.
	Until time.Time `json:"until,omitzero"`
	// Forced is set while the breaker is forced open by hand.
	Forced bool `json:"forced,omitempty"`
	// Admitted is the share of calls the breaker lets through now, from
	// 0 to 1 (manager.Stats.Admitted): 1 while it is closed, growing from
	// 0 to 1 during a slow start after a recovery, 0 while it is open or
	// probing (absent then).
	Admitted float64 `json:"admitted,omitempty"`
	// SlowStartUntil, during a slow start after a recovery, is when it
	// ends: when every call goes through again. Absent otherwise.
	SlowStartUntil time.Time `json:"slow_start_until,omitzero"`
	// StoreDown is set while a shared breaker cannot reach its store.
	StoreDown bool `json:"store_down,omitempty"`
	// Processes, for a shared breaker with a quorum, is how many
	// processes the fleet's count of failures comes from
	// (manager.Stats.Processes).
	Processes int64 `json:"processes,omitempty"`
	// Cause and OpenedBy say why the breaker is open, half-open or
	// probing: the text of the error of the call that opened it, and,
	// for a shared breaker, the process that opened it
	// (manager.Stats.Cause and OpenedBy). Absent while closed.
	Cause    string `json:"cause,omitempty"`
	OpenedBy string `json:"opened_by,omitempty"`
	// DryRun is set for a breaker in a dry run (manager.Config.DryRun),
	// which declines no call; WouldDecline counts the calls it let
	// through that it would have declined.
	DryRun       bool   `json:"dry_run,omitempty"`
	WouldDecline uint64 `json:"would_decline,omitempty"`

	// The counters of manager.Stats. Calls, as everywhere in fusebox
	// (the metrics' calls_total too), is every call that asked for a
	// permit and finished: the released ones (Successes, Failures,
	// Ignored) and the Declined ones. Like every field below, a zero is
	// left out of the JSON, so that a status of 10,000 quiet breakers
	// stays small.
	Calls         uint64 `json:"calls,omitempty"`
	Successes     uint64 `json:"successes,omitempty"`
	Failures      uint64 `json:"failures,omitempty"`
	Ignored       uint64 `json:"ignored,omitempty"`
	Declined      uint64 `json:"declined,omitempty"`
	Stale         uint64 `json:"stale,omitempty"`
	SlowCalls     uint64 `json:"slow_calls,omitempty"`
	DroppedEvents uint64 `json:"dropped_events,omitempty"`

	// CallRate is the calls per second (of Calls, declined ones
	// included) over about the last minute, and FailureRate the share of
	// failures among the calls with an outcome (successes and failures)
	// over the same time. The handler samples
	// the counters every Options.Refresh (at most every 5 seconds), so
	// both are zero until it has two samples.
	CallRate    float64 `json:"call_rate,omitempty"`
	FailureRate float64 `json:"failure_rate,omitempty"`

	// Transitions are the most recent transitions the handler saw, oldest
	// first, at most Options.History of them.
	Transitions []TransitionRecord `json:"transitions,omitempty"`
	// MissedTransitions counts transitions the handler did not see because
	// its event buffer was full; they are missing from Transitions.
	MissedTransitions uint64 `json:"missed_transitions,omitempty"`
}

// TransitionRecord is one transition of a breaker.
type TransitionRecord struct {
	// From and To are the states left and entered.
	From string `json:"from"`
	To   string `json:"to"`
	// At is when the transition happened, on the manager's clock.
	At time.Time `json:"at"`
	// Cause says what made it happen: "trip", "probe", "timer",
	// "force_open", "reset" or "restart".
	Cause string `json:"cause"`
	// Outcome is the outcome of the call that caused it ("success",
	// "failure", "ignore"), or absent when no call did.
	Outcome string `json:"outcome,omitempty"`
	// Err, for a transition to open, is why it opened (manager.Event.Err:
	// the error of the call that opened it, or, for a shared breaker
	// another process opened, "opened by web-7: ..."), on one line and at
	// most 200 bytes; absent otherwise.
	Err string `json:"err,omitempty"`
}

// errText is err's text as the page shows it: one line, bounded.
func errText(err error) string { return reasontext.Line(err.Error(), reasontext.Max) }

// whyOf says who opened the breaker and why, as its card shows it:
// "opened by web-7: dial tcp ...", the cause alone for a breaker kept in
// its process, or "" while closed.
func whyOf(st manager.Stats) string {
	switch {
	case st.OpenedBy != "" && st.Cause != "":
		return "opened by " + st.OpenedBy + ": " + st.Cause
	case st.OpenedBy != "":
		return "opened by " + st.OpenedBy
	}
	return st.Cause
}

func record(ev manager.Event) TransitionRecord {
	r := TransitionRecord{
		From:  ev.Transition.From.String(),
		To:    ev.Transition.To.String(),
		At:    ev.At,
		Cause: ev.Cause.String(),
	}
	if ev.Outcome != 0 {
		r.Outcome = ev.Outcome.String()
	}
	if ev.Err != nil {
		r.Err = errText(ev.Err)
	}
	return r
}

// status takes the current status of every breaker.
func (h *Handler) status() Status {
	h.hub.sync()
	bs := h.m.Breakers()
	st := Status{
		Title:    h.opts.Title,
		Now:      h.m.Clock().Now(),
		Actions:  h.opts.Actions,
		Process:  h.m.Name(),
		Breakers: make([]BreakerStatus, 0, len(bs)),
	}
	select {
	case <-h.m.Done():
		st.Halted = true
	default:
	}
	for _, b := range bs {
		s := b.Stats()
		recs, missed := h.hub.read(s.Name)
		callRate, failureRate := h.hub.rate(s.Name)
		st.Breakers = append(st.Breakers, BreakerStatus{
			Name:              s.Name,
			State:             s.State.String(),
			Since:             s.Since,
			Until:             s.Until,
			Forced:            s.Forced,
			Admitted:          s.Admitted,
			SlowStartUntil:    s.SlowStartUntil,
			StoreDown:         s.StoreDown,
			Processes:         s.Processes,
			Cause:             s.Cause,
			OpenedBy:          s.OpenedBy,
			DryRun:            s.DryRun,
			WouldDecline:      s.WouldDecline,
			Calls:             s.Calls,
			Successes:         s.Successes,
			Failures:          s.Failures,
			Ignored:           s.Ignored,
			Declined:          s.Declined,
			Stale:             s.Stale,
			SlowCalls:         s.SlowCalls,
			DroppedEvents:     s.DroppedEvents,
			CallRate:          callRate,
			FailureRate:       failureRate,
			Transitions:       recs,
			MissedTransitions: missed,
		})
	}
	return st
}

package manager

import (
	"fmt"
	"strings"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

// Config is the configuration of one breaker. Its zero value is valid.
type Config struct {
	// Strategy decides when the closed breaker trips. Nil means
	// breaker.Consecutive{Failures: 5}.
	Strategy breaker.Strategy
	// Recover decides how long the breaker stays open and how long a probe
	// may run. Nil means recover.BasicTimeout{Open: 30 * time.Second}.
	Recover recover.Recover
	// Classify turns a call's error into an outcome. Nil means
	// classify.Default.
	Classify classify.Classifier
	// Store, when set, shares the breaker with every manager, in this
	// process or another, that registers a breaker of the same name on the
	// same store: one breaker for the fleet (see package store). Nil keeps
	// the state in this process only. The Strategy must be one a store can
	// evaluate (breaker.Consecutive, breaker.TimeWindow, or a
	// store.Shareable); Register fails otherwise. The store must be
	// comparable (a pointer, as store.NewMemory and redisstore.New return).
	Store store.Store
	// Fallback says what the breaker does while Store cannot be reached:
	// the zero value, store.FallbackLocal, runs it on its own local state
	// machine until the store answers again. Ignored without a Store.
	Fallback store.Fallback
	// Quorum, for a shared breaker, opens the breaker for the fleet only
	// when the Strategy's threshold is still reached once the Quorum-1
	// processes that reported the most failures are taken out (each
	// manager counts as one): one replica with a broken network cannot
	// open it for everyone, however many calls it makes, nor with the
	// ordinary failures of healthy replicas; two that fail enough can. A process whose
	// own outcomes reach the threshold while the fleet's are short of the
	// quorum opens in its process alone (a transition of cause
	// breaker.CauseAlone), with its own period and its own probe, and
	// tells the store nothing of it, then or when a lost link to the
	// store comes back. Zero or 1: failures from any process count. A
	// breaker that is not shared ignores it; negative fails Register.
	Quorum int
	// SlowCall, when positive, makes a call that takes at least this long,
	// from Acquire to its release on the manager's clock (Options.Clock),
	// count as a failure whatever its error or outcome: a service that
	// hangs trips the breaker after a few slow calls, before its callers'
	// own timeouts stack up. Such calls are counted in Stats.SlowCalls as
	// well as in Stats.Failures, and a slow probe re-opens the breaker.
	// Zero turns it off, and the clock is then not read for the call;
	// negative fails Register.
	SlowCall time.Duration
	// DryRun makes the breaker decline no call: it counts, trips, opens,
	// probes, recovers, publishes its events and its metrics as usual,
	// but a call it would have declined (while open, while another call
	// probes, or forced open) is let through and counted in
	// Stats.WouldDecline instead of Stats.Declined. So a team can watch,
	// on its own traffic, what the breaker would do before it lets it
	// act. In half-open the first call is still the probe, whose outcome
	// closes or re-opens the breaker; the outcomes of the calls let
	// through while it is not closed change nothing. A shared breaker in
	// a dry run stays dry for the fleet: it follows the store (the
	// fleet's openings, periods and probes show in its Stats and events)
	// but reports nothing that could make another process decline: not
	// its outcomes, not an opening (its own trip opens it alone, cause
	// alone, with its own period and probe), not a probe lease.
	// Manual controls (ForceOpen, HalfOpen, Reset) still act for the
	// fleet. Reconfigure may turn it on or off; it costs nothing to a
	// call the breaker admits.
	DryRun bool
	// TimeCalls keeps a histogram of the durations of the calls released
	// through the breaker (Stats.Durations), for the metrics adapters. It
	// costs two reads of the manager's clock per call (see the benchmarks);
	// off by default. Reconfigure may turn it on, or off, which drops the
	// histogram.
	TimeCalls bool
	// SlowStart, when positive, gives a service that just recovered its
	// traffic back gradually: after a recovery (a probe succeeded and
	// closed the breaker), the breaker admits a share of calls that grows
	// linearly from none at the closing to all SlowStart later. A call it
	// declines meanwhile gets a *breaker.OpenError whose State is
	// breaker.Closed and whose Until is the end of the slow start
	// (errors.Is(err, breaker.ErrOpen) holds), counted in Stats.Declined.
	// The breaker is closed all along: the admitted calls count as in any
	// closed period, and enough failures among them trip it again. Reset,
	// a restart after a panic, and any closing that is not a recovery
	// admit every call at once. Stats.Admitted says the share admitted
	// now. Zero turns it off (every call goes through as soon as the
	// breaker closes); negative fails Register. Reconfigure may change it:
	// a slow start that runs is then measured against the new length from
	// its start, and ends at once if that is past, or if the new length is
	// zero.
	SlowStart time.Duration
}

// The defaults of a zero Config.
var (
	defaultStrategy breaker.Strategy = breaker.Consecutive{Failures: 5}
	defaultRecover  recover.Recover  = recover.BasicTimeout{Open: 30 * time.Second}
)

// registerFailed is Register's error for a breaker that could not be
// registered at all (its name is taken, the manager has stopped): err,
// usually a sentinel of this package, follows the breaker's name without
// repeating the "fusebox: " its message starts with, and errors.Is still
// finds it.
func registerFailed(name string, err error) error {
	return &prefixedError{prefix: fmt.Sprintf("fusebox: register breaker %q: ", name), err: err}
}

// prefixedError is err after a prefix that already names the domain.
type prefixedError struct {
	prefix string
	err    error
}

func (e *prefixedError) Error() string {
	return e.prefix + strings.TrimPrefix(e.err.Error(), "fusebox: ")
}

func (e *prefixedError) Unwrap() error { return e.err }

// fallbackName names a Config.Fallback in the manager's log lines.
func fallbackName(f store.Fallback) string {
	switch f {
	case store.FallbackLocal:
		return "local"
	case store.FailOpen:
		return "fail_open"
	case store.FailClosed:
		return "fail_closed"
	}
	return fmt.Sprintf("fallback(%d)", uint8(f))
}

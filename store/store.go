// Package store is the port through which breakers share their state with
// other processes, so that a fleet of replicas calling one service has one
// breaker instead of one per replica.
//
// A breaker registered with a Store (manager.Config.Store) keeps its hot path
// local: each manager mirrors the shared state in the breaker's own snapshot
// and hears of changes through Store.Watch, with a periodic Store.Status
// resync for anything missed. Only these events reach the store:
//
//   - a failure in the closed state (RecordFailure): its reply, the shared
//     count, tells the process at once whether the breaker must open;
//   - the first success after failures this process reported (RecordSuccess),
//     which ends a run of consecutive failures, and, for window policies, the
//     successes counted since the last report;
//   - the opening (Open), set only if absent, so the first opener's period
//     stands for everyone;
//   - the probe: a lease that one process in the fleet wins (AcquireProbe),
//     which every other hears of (a Leased change), and the verdict on it
//     (Resolve), applied only by the lease holder;
//   - manual control: Reset and ForceOpen act for every process.
//
// Time comes from the store: an open period or a lease is a remaining
// duration that the store counts down, never an instant computed on one
// replica's clock.
//
// This package holds the port, the shared policies, and Memory, which shares
// breakers between managers of one process. Package redisstore shares them
// between processes through Redis.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/reasontext"
	"github.com/fusebox-go/fusebox/internal/rule"
)

// Store holds the shared state of breakers, by name. Implementations must be
// safe for concurrent use; every method must honour ctx.
type Store interface {
	// RecordFailure records failures (one or more) of the breaker name
	// under policy p, in the current bucket, together with the successes
	// this process saw since it last reported, and returns the verdict. A
	// process has at most one failure report of a breaker in flight: the
	// failures released meanwhile come with its next report, as a count.
	// successes[a] is the count of the bucket a buckets before the current
	// one, on the store's clock; window policies count them, a consecutive
	// policy ignores them.
	RecordFailure(ctx context.Context, name string, p Policy, failures int64, successes []int64) (Verdict, error)
	// RecordSuccess reports successes: under a consecutive policy it ends
	// the shared run of failures; under a window policy it adds successes,
	// by age as for RecordFailure, to their buckets and returns the
	// window's counts, so that the success that brings the window to its
	// threshold trips the breaker.
	RecordSuccess(ctx context.Context, name string, p Policy, successes []int64) (Verdict, error)
	// Open opens the breaker for period if it is still in the closed
	// epoch epoch, the one the caller's trip was decided in, advancing the
	// epoch; otherwise (another process opened first, or the fleet moved
	// on) it changes nothing, so the first opener's period stands. It
	// returns the status after the call and whether this call opened. An
	// epoch above the store's (the store lost its data) is adopted. A
	// period of zero (the opener's own period ended before its opening
	// reached the store) opens the epoch with its period already over.
	// The store keeps why, who opened the breaker and why, with the
	// opening (Status.Reason, Change.Reason) until the epoch ends.
	Open(ctx context.Context, name string, epoch uint64, period time.Duration, why Reason) (Status, bool, error)
	// AcquireProbe takes the probe lease of the breaker for token, for
	// lease long, if the breaker is in the opened epoch epoch, its open
	// period is over and no process holds the lease; otherwise it returns
	// false and the status, which says why and for how long. A lease
	// taken is announced (a Leased change), so that no other process asks
	// for one while it runs. A lease belongs to its epoch: every opening
	// and closing ends it. An epoch
	// above the store's (the store lost its data) is adopted, and the
	// breaker held open for lease, so that a probe still in flight from
	// before the loss ends before another starts.
	AcquireProbe(ctx context.Context, name, token string, epoch uint64, lease time.Duration) (bool, Status, error)
	// Resolve applies the probe's outcome if token still holds the lease
	// of epoch: Success closes the breaker (the open marker, the lease and
	// the counts go) and starts the fleet's slow start, reopen long
	// (manager.Config.SlowStart of the process that probed; zero: none),
	// which Status.SlowStart and the Closed change then count down;
	// Failure opens it again for reopen, with why as the opening's
	// Reason; Ignore gives the lease back. It reports whether it applied
	// the verdict, and the status after the call; a stale verdict changes
	// nothing.
	Resolve(ctx context.Context, name, token string, epoch uint64, o classify.Outcome, reopen time.Duration, why Reason) (Status, bool, error)
	// Reset closes the breaker for every process, whatever its state: the
	// open marker, the probe lease, the counts and a slow start go, and the epoch moves
	// to the next closed one (from a closed epoch too, so that a trip
	// decided before the reset cannot open the breaker afterwards). It
	// returns the status after the call.
	Reset(ctx context.Context, name string) (Status, error)
	// ForceOpen opens the breaker for every process until Reset, whatever
	// its state: the epoch moves to the next opened one (from an opened
	// epoch too, so that a probe in flight and its verdict are fenced), the
	// probe lease goes, and no period ends the opening: the status reads
	// Forced until a Reset. Forcing a breaker already forced changes
	// nothing. It returns the status after the call.
	ForceOpen(ctx context.Context, name string) (Status, error)
	// Status returns the shared status of each of names, in order. An
	// error is a failed read; a breaker whose stored state cannot be read
	// has a status whose Err says why, and the others are read as usual.
	Status(ctx context.Context, names []string) ([]Status, error)
	// Watch calls fn with every change any process makes, in order, until
	// ctx is done (it then returns nil) or the connection to the store
	// fails (it returns the error; call it again to resume). It calls
	// ready once the subscription is in place: changes made before that
	// may be missed, so a caller reads the state it needs after ready.
	// Neither fn nor ready may block.
	Watch(ctx context.Context, ready func(), fn func(Change)) error
	// Check reports, without a round trip, why the store cannot hold the
	// breaker name: a store built with bad options, or a name it cannot
	// keep (for Redis, one whose keys would hash to different slots). The
	// manager calls it at Register, which fails with its error; nil means
	// the store can hold the breaker.
	Check(name string) error
}

// NamesWatcher is implemented by a store that can watch only the breakers
// a caller names (redisstore on a Cluster with shard channels subscribes
// to their slots only). The manager uses it instead of Store.Watch when a
// store has it.
//
// WatchNames calls names as it starts, and again each time the channel
// names returned last is ready; names returns every breaker to watch from
// then on, and a channel that is closed when that list changes next. It
// calls ready with breakers whose changes it can no longer miss: the whole
// first list once subscribed, then the breakers each later list adds; the
// caller reads the state of those. fn, ready and names must not block. It
// returns as Watch does.
type NamesWatcher interface {
	WatchNames(ctx context.Context, names func() ([]string, <-chan struct{}), ready func(names []string), fn func(Change)) error
}

// Policy is a breaker's strategy in the terms a store evaluates. Exactly one
// of Failures and Rate is set: a policy with a positive Rate is a window
// policy, one with positive Failures a consecutive one.
type Policy struct {
	// Failures, when positive, trips the breaker when the shared run of
	// failures, with no success reported in between, reaches Failures.
	Failures int
	// Rate, when positive, trips the breaker when over the last Period at
	// least MinCalls calls were reported and failures/calls >= Rate. The
	// period is counted in Buckets buckets of Period/Buckets each (a whole
	// number of milliseconds), aligned on the Unix epoch: bucket i covers
	// [i*w, (i+1)*w) of Unix time for the width w, on the store's clock, as
	// a breaker.TimeWindow aligns its own.
	Rate     float64
	Period   time.Duration
	Buckets  int
	MinCalls int
	// Quorum, when above 1, opens the breaker for the fleet only when the
	// threshold is still reached without what the Quorum-1 processes that
	// reported the most failures counted (manager.Config.Quorum): the
	// store keeps what each Reporter reported, of the current run for a
	// consecutive policy, in the window for a window policy, and returns
	// the largest shares (Verdict.LargestCalls, LargestFailures). A store
	// need not count reporters under a Quorum of 0 or 1.
	Quorum int
	// Reporter names the process that reports, with RecordFailure, for
	// Quorum: the manager sets it, one name per manager.
	Reporter string
}

// window reports whether p is a rate-over-time policy.
func (p Policy) window() bool { return p.Rate > 0 }

// Trips reports whether a verdict's counts trip a breaker under p: the
// strategy's threshold is reached, and, under a Quorum q above 1, still
// reached once what the q-1 processes that reported the most failures
// counted is taken out (Verdict.LargestCalls, LargestFailures). So one
// process that fails every call cannot open the fleet however many calls
// it makes, two can, and the occasional failures of healthy processes
// do not complete the quorum of one bad one. The threshold is the
// strategy's own rule, applied to the counts the store keeps: stores
// count, and only this rule decides, so a local and a shared breaker fed
// the same outcomes trip at the same call.
func (p Policy) Trips(v Verdict) bool {
	if p.Quorum > 1 {
		w := rule.Without(rule.Share{Calls: v.Calls, Failures: v.Failures}, rule.Share{Calls: v.LargestCalls, Failures: v.LargestFailures})
		v.Calls, v.Failures = w.Calls, w.Failures
	}
	return p.reached(v)
}

// bucket returns the index of the bucket of a window policy that holds
// instant t (see Rate): the numbering every store, and the manager's
// count of the successes it has not reported yet, use (rule.Bucket).
func (p Policy) bucket(t time.Time) int64 { return rule.Bucket(t, rule.Width(p.Period, p.Buckets)) }

// reached reports whether a verdict's counts reach the strategy's
// threshold, whatever the processes they come from: Trips without the
// quorum (rule.Reached).
func (p Policy) reached(v Verdict) bool {
	return rule.Reached(p.Rate, int64(p.MinCalls), p.Failures, v.Calls, v.Failures)
}

// Shareable is implemented by strategies, other than the built-in ones, that
// can be evaluated by a store.
type Shareable interface {
	SharedPolicy() (Policy, error)
}

// ErrNotShareable is matched by the error Register returns for a shared
// breaker whose strategy no store can evaluate.
var ErrNotShareable = errors.New("fusebox: strategy cannot be shared through a store")

// Verdict is a store's answer to reported outcomes: the counts, and the
// breaker's status when they were counted.
type Verdict struct {
	// Failures is the shared run of failures (consecutive policy) or the
	// failures in the window (window policy), this one included.
	Failures int64
	// Calls is the calls in the window (window policy only).
	Calls int64
	// Processes is how many processes reported the failures counted
	// (Policy.Quorum above 1 only; zero otherwise).
	Processes int64
	// LargestCalls and LargestFailures are what the Quorum-1 processes
	// that reported the most failures counted (Policy.Quorum above 1
	// only; zero otherwise): the quorum rule judges the counts without
	// them (see Policy.Trips). Of a window, each process's share of it is
	// kept in two spans of the window's length (rule.Slide).
	LargestCalls, LargestFailures int64
	// Status is the breaker's shared state. While it is Opened, the counts
	// trip nothing: the fleet is open already.
	Status
}

// Status is a breaker's shared state.
type Status struct {
	// Epoch is advanced by every opening and every closing of the
	// breaker: it is odd while the breaker is opened (open, half-open or
	// probing) and even while it is closed, and it fences every decision
	// taken in an older epoch. Zero is the first closed epoch.
	Epoch uint64
	// Open is the remaining open period; zero when the breaker is not open.
	Open time.Duration
	// Probe is the remaining time of the probe lease; zero when no process
	// holds it.
	Probe time.Duration
	// Forced reports that the breaker was forced open (ForceOpen): it
	// stays open, with no period and no probe, until a Reset.
	Forced bool
	// SlowStart, in a closed epoch that a successful probe began, is the
	// time left of the fleet's slow start (the length Resolve was given);
	// zero otherwise. Every process that shares the breaker ramps its
	// calls up to the same end: a slow start travels, like an open
	// period, as a duration the store counts down, never as an instant of
	// one process's clock.
	SlowStart time.Duration
	// Reason is who opened the breaker and why, as the opener told Open
	// (or Resolve, for a failed probe), for the whole opened epoch: open,
	// half-open and probing. Zero while closed and while forced open.
	Reason Reason
	// Err, in a status read (Store.Status), says why this breaker's
	// status could not be read: its stored state holds data the store
	// did not write (a key that does not parse, or of the wrong type).
	// The other fields are then zero. It is that breaker's problem
	// alone: the read's other statuses stand, and a Reset repairs it.
	Err error
}

// Reason says which process opened a breaker and why: its name
// (manager.Options.Name) and the error of the call that opened it. It
// travels with the opening through the store, so that every process of
// the fleet can say why a breaker it did not open is open.
type Reason struct {
	// By is the opener's process name.
	By string
	// Why is the text of the error of the call that opened the breaker
	// (the call that tripped it, or the probe that failed), on one line
	// (every control character a space) and at most 200 bytes, cut at a
	// character boundary with "..." at the end; empty if that call
	// returned no error (a slow call, or an outcome reported without
	// one).
	Why string
}

// clean returns r as a store keeps it: each field on one line, By at most
// 200 bytes too.
func (r Reason) clean() Reason {
	return Reason{By: reasontext.Line(r.By, reasontext.Max), Why: reasontext.Line(r.Why, reasontext.Max)}
}

// String returns "opened by web-7: dial tcp ...: connection refused", or
// "opened by web-7" without a Why; "" for the zero Reason.
func (r Reason) String() string {
	switch {
	case r.By == "" && r.Why == "":
		return ""
	case r.Why == "":
		return "opened by " + r.By
	case r.By == "":
		return "opened: " + r.Why
	}
	return "opened by " + r.By + ": " + r.Why
}

// Opened reports whether the status's epoch is one of an opened breaker.
func (s Status) Opened() bool { return s.Epoch%2 == 1 }

// ChangeKind says what changed in a Change.
type ChangeKind uint8

const (
	// Opened: the breaker was opened (or re-opened by a failed probe) for
	// Change.Open.
	Opened ChangeKind = iota + 1
	// Closed: a probe succeeded and the breaker closed.
	Closed
	// Released: the probe lease was given back without a verdict.
	Released
	// Reset: the breaker was closed by Reset, from any state.
	Reset
	// Forced: the breaker was forced open by ForceOpen, until a Reset.
	Forced
	// Leased: a process took the probe lease (AcquireProbe) for
	// Change.Probe: the others hear that the fleet probes, and ask for
	// no lease of their own until it ends.
	Leased
)

// String returns "opened", "closed", "released", "reset", "forced" or
// "leased".
func (k ChangeKind) String() string {
	switch k {
	case Leased:
		return "leased"
	case Reset:
		return "reset"
	case Forced:
		return "forced"
	case Opened:
		return "opened"
	case Closed:
		return "closed"
	case Released:
		return "released"
	}
	return fmt.Sprintf("change(%d)", uint8(k))
}

// Change is one change of a breaker's shared state, as Watch delivers it.
type Change struct {
	Name string
	Kind ChangeKind
	// Epoch is the breaker's epoch after the change.
	Epoch uint64
	// Open is the open period set by an Opened change.
	Open time.Duration
	// Probe is the lease a Leased change took.
	Probe time.Duration
	// SlowStart is the slow start a Closed change began (see
	// Status.SlowStart); zero for none.
	SlowStart time.Duration
	// Reason is who opened the breaker and why, for an Opened change.
	Reason Reason
}

// Fallback says what a shared breaker does while its store cannot be
// reached.
type Fallback uint8

const (
	// FallbackLocal, the zero value, runs the breaker on its own local state
	// machine, as if it were not shared, until the store answers again.
	FallbackLocal Fallback = iota
	// FailOpen lets every call through while the store cannot be reached:
	// the breaker neither declines nor trips.
	FailOpen
	// FailClosed declines every call while the store cannot be reached.
	FailClosed
)

// DefaultFailureTTL is how long a shared run of consecutive failures is
// remembered after the last failure, unless a store is configured otherwise.
const DefaultFailureTTL = time.Minute

// Package otelmetrics reports the breakers of a fusebox manager through
// OpenTelemetry metrics.
//
// Register creates asynchronous (observable) instruments on a meter of the
// provider in Options.MeterProvider (the global one, otel.GetMeterProvider,
// by default), named after this package (ScopeName) with the module's
// version, and one callback. Whenever a reader of the provider collects, the
// callback reads every breaker's counters and state
// (manager.Breaker.Stats) and the transitions counted from the manager's
// events (manager.Manager.Subscribe), so calls through a breaker do no extra
// work for it:
//
//	reg, err := otelmetrics.Register(m, otelmetrics.Options{MeterProvider: provider})
//	if err != nil { ... }
//	defer reg.Close()
//
// The instruments, each with a "breaker" attribute naming the breaker
// (Options.Prefix replaces the "fusebox" prefix), and the name the
// OpenTelemetry Prometheus exporter gives each, which is the name package
// prommetrics uses, so that one query serves both:
//
//	fusebox.breaker.state               gauge, attribute state: 1 for the current state, 0 for the other three (fusebox_breaker_state)
//	fusebox.breaker.forced_open         gauge: 1 while forced open by hand (fusebox_breaker_forced_open)
//	fusebox.breaker.dry_run             gauge: 1 while in a dry run, manager.Config.DryRun: the breaker declines no call, whatever its state says (fusebox_breaker_dry_run)
//	fusebox.breaker.open_until_timestamp_seconds gauge: when the open period ends, in Unix seconds, manager.Stats.Until; 0 when not open, and while forced open (fusebox_breaker_open_until_timestamp_seconds)
//	fusebox.breaker.admitted_ratio      gauge: the share of calls let through now, 0 to 1, manager.Stats.Admitted: 1 closed, rising during a slow start, 0 open (fusebox_breaker_admitted_ratio)
//	fusebox.breaker.failure_rate        gauge: failures/calls in the strategy's window, windowed strategies only (fusebox_breaker_failure_rate)
//	fusebox.breaker.store_down          gauge: 1 while a shared breaker cannot reach its store, shared breakers only (fusebox_breaker_store_down)
//	fusebox.breaker.calls               counter {call}: calls that asked for a permit and finished, declined ones included, manager.Stats.Calls (fusebox_breaker_calls_total)
//	fusebox.breaker.released_calls      counter {call}, attribute outcome: calls let through and released, by outcome (fusebox_breaker_released_calls_total)
//	fusebox.breaker.declined_calls      counter {call}: calls declined by an open or probing breaker (fusebox_breaker_declined_calls_total)
//	fusebox.breaker.slow_calls          counter {call}: calls that took at least Config.SlowCall, counted as failures (fusebox_breaker_slow_calls_total)
//	fusebox.breaker.would_decline_calls counter {call}: calls a breaker in a dry run let through that it would have declined, manager.Config.DryRun only (fusebox_breaker_would_decline_calls_total)
//	fusebox.breaker.stale_releases      counter {release}: releases of permits from an earlier state (fusebox_breaker_stale_releases_total)
//	fusebox.breaker.dropped_events      counter {event}: events any subscriber lost to a full buffer (fusebox_breaker_dropped_events_total)
//	fusebox.breaker.transitions         counter {transition}, attributes from and to: from zero for every pair the breaker can make (fusebox_breaker_transitions_total)
//	fusebox.breaker.missed_transitions  counter {transition}: transitions lost to this adapter's full buffer (fusebox_breaker_missed_transitions_total)
//	fusebox.breaker.store_errors        counter {error}: failed store calls, shared breakers only (fusebox_breaker_store_errors_total)
//	fusebox.manager.halted              gauge: 1 once the manager has stopped (fusebox_manager_halted)
//
// The gauges have no unit: the unit "1" would make the exporter add
// "_ratio" to their names. The call-duration histogram of prommetrics has
// no counterpart here: the OpenTelemetry API has no asynchronous histogram.
//
// Counters are cumulative. The call counters are the manager's own and
// count from the breaker's registration: calls is released_calls, over its
// outcomes, plus declined_calls, as manager.Stats.Calls is; the transition counters count
// from Register, from zero for every pair of states the breaker can make:
// nine for a breaker kept in its process (a closed breaker never becomes
// half_open or probing, nor an open one probing, without an open period's
// end between them), all twelve for a shared one, which also follows the
// fleet's state; a pair outside that set that happens anyway is reported
// from then on. A transition lost because the adapter's event buffer was
// full is reported by the manager with the breaker's next event, and
// counted in missed_transitions. A breaker removed from the manager is
// reported no more.
package otelmetrics

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/metrics/internal/tally"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// DefaultPrefix is the first part of every instrument name when
// Options.Prefix is empty.
const DefaultPrefix = "fusebox"

// ScopeName is the instrumentation scope of the meter Register uses: this
// package's import path.
const ScopeName = "github.com/fusebox-go/fusebox/metrics/otelmetrics"

// Version returns the version of this package's module as the program was
// built with it, the scope's version: "(devel)" when it is the main module
// or built from a workspace, empty when the program has no build
// information.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	const mod = ScopeName
	if bi.Main.Path == mod {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == mod {
			if d.Replace != nil && d.Replace.Version != "" {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return "(devel)"
}

// Options configure Register. The zero value is valid.
type Options struct {
	// MeterProvider provides the meter. Nil means the global provider,
	// otel.GetMeterProvider(), as set by the program.
	MeterProvider metric.MeterProvider
	// Prefix is the first part of every instrument name, before
	// ".breaker.". Empty means DefaultPrefix. The meter rejects names that
	// are not valid instrument names, and Register returns its error.
	Prefix string
	// Attributes are added to every measurement, for example to tell
	// several managers of one process apart.
	Attributes []attribute.KeyValue
	// EventBuffer is the buffer of the adapter's subscription to the
	// manager's events. Below 1 means 1024; above
	// 262,144 (1<<18) is an error. Transitions that arrive while
	// it is full are counted in missed_transitions instead.
	EventBuffer int
}

// Registration is the link between one manager and one meter made by
// Register. End it with Close.
type Registration struct {
	m     *manager.Manager
	tally *tally.Tally
	attrs []attribute.KeyValue
	reg   metric.Registration
	once  sync.Once
	err   error

	state, forced, dryRun, storeDown, halted                                          metric.Int64ObservableGauge
	rate, admitted, openUntil                                                         metric.Float64ObservableGauge
	calls, released, declined, stale, slow, dropped, transitions, missed, storeErrors metric.Int64ObservableCounter
	wouldDecline                                                                      metric.Int64ObservableCounter
}

// Register creates the instruments on a meter of opts.MeterProvider and
// reports every breaker of m through them, including breakers registered
// later. It subscribes to m's events at once, so transitions are counted
// from now on. It fails if m is nil, opts.EventBuffer is too large or the
// meter rejects an instrument; nothing is left registered or subscribed
// then.
func Register(m *manager.Manager, opts Options) (*Registration, error) {
	if m == nil {
		return nil, errors.New("fusebox: otelmetrics.Register: the manager is nil")
	}
	provider := opts.MeterProvider
	if provider == nil {
		provider = otel.GetMeterProvider()
	}
	meter := provider.Meter(ScopeName, metric.WithInstrumentationVersion(Version()))
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	r := &Registration{m: m, attrs: append([]attribute.KeyValue(nil), opts.Attributes...)}
	var errs []error
	check := func(name string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("instrument %q: %w", name, err))
		}
	}
	gauge := func(name, desc string) metric.Int64ObservableGauge {
		name = prefix + ".breaker." + name
		g, err := meter.Int64ObservableGauge(name, metric.WithDescription(desc))
		check(name, err)
		return g
	}
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		name = prefix + ".breaker." + name
		c, err := meter.Int64ObservableCounter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		check(name, err)
		return c
	}
	r.state = gauge("state", "Whether the breaker is in the state: 1 for its current state, 0 for the others.")
	r.forced = gauge("forced_open", "1 while the breaker is forced open by hand, 0 otherwise.")
	r.dryRun = gauge("dry_run", "1 while the breaker is in a dry run (Config.DryRun): it decides, opens and probes as usual but declines no call; 0 otherwise.")
	r.storeDown = gauge("store_down", "1 while the shared breaker cannot reach its store and follows its fallback, 0 otherwise.")
	var err error
	r.rate, err = meter.Float64ObservableGauge(prefix+".breaker.failure_rate",
		metric.WithDescription("Failures divided by calls in the window of the breaker's strategy; while not closed, of the window it opened on."))
	check(prefix+".breaker.failure_rate", err)
	r.admitted, err = meter.Float64ObservableGauge(prefix+".breaker.admitted_ratio",
		metric.WithDescription("The share of calls the breaker lets through now, from 0 to 1: 1 while closed, rising from 0 to 1 during a slow start after a recovery, 0 while open or probing."))
	check(prefix+".breaker.admitted_ratio", err)
	// No unit: the name says it, as the Prometheus exporter would.
	r.openUntil, err = meter.Float64ObservableGauge(prefix+".breaker.open_until_timestamp_seconds",
		metric.WithDescription("When the breaker's open period ends (its next trial), in seconds since the Unix epoch; 0 while the breaker is not open, and while it is forced open (no period ends it)."))
	check(prefix+".breaker.open_until_timestamp_seconds", err)
	r.halted, err = meter.Int64ObservableGauge(prefix+".manager.halted",
		metric.WithDescription("1 once the manager has stopped: halted after a burst of restarts, or stopped; its breakers then refuse every call."))
	check(prefix+".manager.halted", err)
	r.calls = counter("calls", "{call}", "Calls that asked the breaker for a permit and finished: released ones of every outcome, and declined ones.")
	r.released = counter("released_calls", "{call}", "Calls the breaker let through and that were released, by outcome.")
	r.declined = counter("declined_calls", "{call}", "Calls declined by the breaker while open or probing.")
	r.stale = counter("stale_releases", "{release}", "Releases of permits granted before the breaker last changed state; they changed nothing.")
	r.slow = counter("slow_calls", "{call}", "Calls that took at least the breaker's Config.SlowCall and so counted as failures.")
	r.wouldDecline = counter("would_decline_calls", "{call}", "Calls the breaker, in a dry run, let through that it would have declined; not in calls' declined ones.")
	r.dropped = counter("dropped_events", "{event}", "The breaker's events that a subscriber of the manager lost because its buffer was full.")
	r.transitions = counter("transitions", "{transition}", "Transitions of the breaker seen since the adapter was registered.")
	r.missed = counter("missed_transitions", "{transition}", "Transitions of the breaker the adapter did not see because its event buffer was full.")
	r.storeErrors = counter("store_errors", "{error}", "Calls of the shared breaker to its store that failed.")
	if len(errs) > 0 {
		return nil, fmt.Errorf("fusebox: otelmetrics.Register: %w", errors.Join(errs...))
	}
	t, err := tally.Start(m, opts.EventBuffer)
	if err != nil {
		return nil, fmt.Errorf("fusebox: otelmetrics.Register: Options.EventBuffer: %w", err)
	}
	r.tally = t
	reg, err := meter.RegisterCallback(r.observe, r.state, r.forced, r.dryRun, r.storeDown, r.halted, r.rate, r.admitted, r.openUntil,
		r.calls, r.released, r.declined, r.stale, r.slow, r.dropped, r.transitions, r.missed, r.storeErrors, r.wouldDecline)
	if err != nil {
		r.tally.Close()
		return nil, fmt.Errorf("fusebox: otelmetrics.Register: callback: %w", err)
	}
	r.reg = reg
	return r, nil
}

var states = [...]breaker.State{breaker.Closed, breaker.Open, breaker.HalfOpen, breaker.Probing}

// localCan marks the pairs of tally.Shared (every pair of different
// states) that a breaker kept in its process can make (tally.Local).
var localCan = func() (can [12]bool) {
	for i, tr := range tally.Shared {
		for _, l := range tally.Local {
			can[i] = can[i] || tr == l
		}
	}
	return can
}()

// observe is the meter's callback: one measurement per breaker and
// attribute set.
func (r *Registration) observe(_ context.Context, o metric.Observer) error {
	r.tally.Sync()
	halted := int64(0)
	select {
	case <-r.m.Done():
		halted = 1
	default:
	}
	o.ObserveInt64(r.halted, halted, metric.WithAttributes(r.attrs...))
	for _, b := range r.m.Breakers() {
		st := b.Stats()
		base := append(r.attrs[:len(r.attrs):len(r.attrs)], attribute.String("breaker", strings.ToValidUTF8(st.Name, "\uFFFD")))
		plain := metric.WithAttributes(base...)
		with := func(kv ...attribute.KeyValue) metric.MeasurementOption {
			return metric.WithAttributes(append(base[:len(base):len(base)], kv...)...)
		}
		for _, s := range states {
			o.ObserveInt64(r.state, boolValue(st.State == s), with(attribute.String("state", s.String())))
		}
		o.ObserveInt64(r.forced, boolValue(st.Forced), plain)
		o.ObserveInt64(r.dryRun, boolValue(st.DryRun), plain)
		o.ObserveFloat64(r.openUntil, openUntil(st), plain)
		o.ObserveFloat64(r.admitted, st.Admitted, plain)
		o.ObserveInt64(r.calls, int64(st.Calls), plain)
		o.ObserveInt64(r.released, int64(st.Successes), with(attribute.String("outcome", "success")))
		o.ObserveInt64(r.released, int64(st.Failures), with(attribute.String("outcome", "failure")))
		o.ObserveInt64(r.released, int64(st.Ignored), with(attribute.String("outcome", "ignore")))
		o.ObserveInt64(r.declined, int64(st.Declined), plain)
		o.ObserveInt64(r.stale, int64(st.Stale), plain)
		o.ObserveInt64(r.slow, int64(st.SlowCalls), plain)
		if st.DryRun || st.WouldDecline > 0 {
			o.ObserveInt64(r.wouldDecline, int64(st.WouldDecline), plain)
		}
		o.ObserveInt64(r.dropped, int64(st.DroppedEvents), plain)
		n := r.tally.Get(st.Name)
		for i, tr := range tally.Shared {
			if c := n.Of(tr); c > 0 || st.Shared || localCan[i] {
				o.ObserveInt64(r.transitions, int64(c),
					with(attribute.String("from", tr.From.String()), attribute.String("to", tr.To.String())))
			}
		}
		o.ObserveInt64(r.missed, int64(n.Missed), plain)
		if st.Windowed {
			rate := 0.0
			if st.WindowCalls > 0 {
				rate = float64(st.WindowFailures) / float64(st.WindowCalls)
			}
			o.ObserveFloat64(r.rate, rate, plain)
		}
		if st.Shared {
			o.ObserveInt64(r.storeDown, boolValue(st.StoreDown), plain)
			o.ObserveInt64(r.storeErrors, int64(st.StoreErrors), plain)
		}
	}
	return nil
}

// openUntil is when the open period of st ends, in Unix seconds, or 0
// when st is not open or its period has no end (forced).
func openUntil(st manager.Stats) float64 {
	if st.State != breaker.Open || st.Until.IsZero() {
		return 0
	}
	return float64(st.Until.UnixNano()) / 1e9
}

func boolValue(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// Close unregisters the callback, so the instruments report nothing more,
// ends the subscription to the manager's events and waits for the
// adapter's goroutine to return. It returns the meter's error from
// unregistering, if any. Calling Close more than once does nothing more and
// returns the same error.
func (r *Registration) Close() error {
	r.once.Do(func() {
		r.err = r.reg.Unregister()
		r.tally.Close()
	})
	return r.err
}

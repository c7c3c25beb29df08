// Package otelmetrics reports the breakers of a fusebox manager through an
// OpenTelemetry meter.
//
// Register creates asynchronous (observable) instruments and one callback.
// Whenever the meter's reader collects, the callback reads every breaker's
// counters and state (manager.Breaker.Stats) and the transitions counted
// from the manager's events (manager.Manager.Subscribe), so calls through a
// breaker do no extra work for it:
//
//	reg, err := otelmetrics.Register(m, provider.Meter("fusebox"), otelmetrics.Options{})
//	if err != nil { ... }
//	defer reg.Close()
//
// The instruments, each with a "breaker" attribute naming the breaker
// (Options.Prefix replaces the "fusebox" prefix):
//
//	fusebox.breaker.state               gauge, attribute state: 1 for the current state, 0 for the other three
//	fusebox.breaker.forced_open         gauge: 1 while forced open by hand
//	fusebox.breaker.calls               counter {call}, attribute outcome: released calls (success, failure, ignore)
//	fusebox.breaker.declined_calls      counter {call}: calls declined by an open or probing breaker
//	fusebox.breaker.stale_releases      counter {release}: releases of permits from an earlier state
//	fusebox.breaker.dropped_events      counter {event}: events any subscriber lost to a full buffer
//	fusebox.breaker.transitions         counter {transition}, attributes from and to: transitions seen since Register
//	fusebox.breaker.missed_transitions  counter {transition}: transitions lost to this adapter's full buffer
//
// Counters are cumulative. The call counters are the manager's own and count
// from the breaker's registration; the transition counters count from
// Register. A transition lost because the adapter's event buffer was full is
// found as a gap in the breaker's generation numbers when its next
// transition arrives, and counted in missed_transitions.
package otelmetrics

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/metrics/internal/tally"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// DefaultPrefix is the first part of every instrument name when
// Options.Prefix is empty.
const DefaultPrefix = "fusebox"

// Options configure Register. The zero value is valid.
type Options struct {
	// Prefix is the first part of every instrument name, before
	// ".breaker.". Empty means DefaultPrefix. The meter rejects names that
	// are not valid instrument names, and Register returns its error.
	Prefix string
	// Attributes are added to every measurement, for example to tell
	// several managers of one process apart.
	Attributes []attribute.KeyValue
	// EventBuffer is the buffer of the adapter's subscription to the
	// manager's events. Below 1 means 1024; above manager.MaxSubscribeBuffer
	// is an error. Transitions that arrive while
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

	state, forced                                        metric.Int64ObservableGauge
	calls, declined, stale, dropped, transitions, missed metric.Int64ObservableCounter
}

// Register creates the instruments on meter and reports every breaker of m
// through them, including breakers registered later. It subscribes to m's
// events at once, so transitions are counted from now on. It fails if m or
// meter is nil or the meter rejects an instrument; nothing is left
// registered or subscribed then.
func Register(m *manager.Manager, meter metric.Meter, opts Options) (*Registration, error) {
	if m == nil {
		return nil, errors.New("fusebox: otelmetrics.Register: the manager is nil")
	}
	if meter == nil {
		return nil, errors.New("fusebox: otelmetrics.Register: the meter is nil")
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	r := &Registration{m: m, attrs: append([]attribute.KeyValue(nil), opts.Attributes...)}
	var errs []error
	gauge := func(name, desc string) metric.Int64ObservableGauge {
		g, err := meter.Int64ObservableGauge(prefix+".breaker."+name, metric.WithDescription(desc), metric.WithUnit("1"))
		if err != nil {
			errs = append(errs, fmt.Errorf("instrument %q: %w", prefix+".breaker."+name, err))
		}
		return g
	}
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, err := meter.Int64ObservableCounter(prefix+".breaker."+name, metric.WithDescription(desc), metric.WithUnit(unit))
		if err != nil {
			errs = append(errs, fmt.Errorf("instrument %q: %w", prefix+".breaker."+name, err))
		}
		return c
	}
	r.state = gauge("state", "Whether the breaker is in the state: 1 for its current state, 0 for the others.")
	r.forced = gauge("forced_open", "1 while the breaker is forced open by hand, 0 otherwise.")
	r.calls = counter("calls", "{call}", "Calls released through the breaker, by outcome.")
	r.declined = counter("declined_calls", "{call}", "Calls declined by the breaker while open or probing.")
	r.stale = counter("stale_releases", "{release}", "Releases of permits granted before the breaker last changed state; they changed nothing.")
	r.dropped = counter("dropped_events", "{event}", "The breaker's events that a subscriber of the manager lost because its buffer was full.")
	r.transitions = counter("transitions", "{transition}", "Transitions of the breaker seen since the adapter was registered.")
	r.missed = counter("missed_transitions", "{transition}", "Transitions of the breaker the adapter did not see because its event buffer was full.")
	if len(errs) > 0 {
		return nil, fmt.Errorf("fusebox: otelmetrics.Register: %w", errors.Join(errs...))
	}
	t, err := tally.Start(m, opts.EventBuffer)
	if err != nil {
		return nil, fmt.Errorf("fusebox: otelmetrics.Register: Options.EventBuffer: %w", err)
	}
	r.tally = t
	reg, err := meter.RegisterCallback(r.observe, r.state, r.forced, r.calls, r.declined, r.stale, r.dropped, r.transitions, r.missed)
	if err != nil {
		r.tally.Close()
		return nil, fmt.Errorf("fusebox: otelmetrics.Register: callback: %w", err)
	}
	r.reg = reg
	return r, nil
}

var states = [...]breaker.State{breaker.Closed, breaker.Open, breaker.HalfOpen, breaker.Probing}

// observe is the meter's callback: one measurement per breaker and
// attribute set.
func (r *Registration) observe(_ context.Context, o metric.Observer) error {
	counts := r.tally.Counts()
	for _, b := range r.m.Breakers() {
		st := b.Stats()
		base := append(r.attrs[:len(r.attrs):len(r.attrs)], attribute.String("breaker", strings.ToValidUTF8(st.Name, "\uFFFD")))
		with := func(kv ...attribute.KeyValue) metric.MeasurementOption {
			return metric.WithAttributes(append(base[:len(base):len(base)], kv...)...)
		}
		for _, s := range states {
			o.ObserveInt64(r.state, boolValue(st.State == s), with(attribute.String("state", s.String())))
		}
		o.ObserveInt64(r.forced, boolValue(st.Forced), with())
		o.ObserveInt64(r.calls, int64(st.Successes), with(attribute.String("outcome", "success")))
		o.ObserveInt64(r.calls, int64(st.Failures), with(attribute.String("outcome", "failure")))
		o.ObserveInt64(r.calls, int64(st.Ignored), with(attribute.String("outcome", "ignore")))
		o.ObserveInt64(r.declined, int64(st.Declined), with())
		o.ObserveInt64(r.stale, int64(st.Stale), with())
		o.ObserveInt64(r.dropped, int64(st.DroppedEvents), with())
		n := counts[st.Name]
		for _, from := range states {
			for _, to := range states {
				if v := n.Transitions[from][to]; v > 0 {
					o.ObserveInt64(r.transitions, int64(v),
						with(attribute.String("from", from.String()), attribute.String("to", to.String())))
				}
			}
		}
		o.ObserveInt64(r.missed, int64(n.Missed), with())
	}
	return nil
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

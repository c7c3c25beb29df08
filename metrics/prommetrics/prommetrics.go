// Package prommetrics exports the breakers of a fusebox manager as
// Prometheus metrics.
//
// A Collector implements prometheus.Collector. At each scrape it reads every
// breaker's counters and state (manager.Breaker.Stats) and the transitions
// it has counted from the manager's events (manager.Manager.Subscribe), so
// calls through a breaker do no extra work for it. Register it with a
// registry and close it when done:
//
//	c, err := prommetrics.New(m, prommetrics.Options{})
//	if err != nil { ... }
//	defer c.Close()
//	prometheus.MustRegister(c)
//
// The metrics, each with a "breaker" label naming the breaker (Namespace
// replaces the "fusebox" prefix):
//
//	fusebox_breaker_state{breaker, state}              gauge: 1 for the current state, 0 for the other three
//	fusebox_breaker_forced_open{breaker}               gauge: 1 while forced open by hand
//	fusebox_breaker_calls_total{breaker, outcome}      counter: released calls by outcome (success, failure, ignore)
//	fusebox_breaker_declined_calls_total{breaker}      counter: calls declined by an open or probing breaker
//	fusebox_breaker_stale_releases_total{breaker}      counter: releases of permits from an earlier state
//	fusebox_breaker_dropped_events_total{breaker}      counter: events any subscriber lost to a full buffer
//	fusebox_breaker_transitions_total{breaker, from, to} counter: transitions seen by this collector
//	fusebox_breaker_missed_transitions_total{breaker}  counter: transitions this collector lost to a full buffer
//
// The call counters are the manager's own and count from the breaker's
// registration. The transition counters count from the collector's
// creation. Transitions lost because the collector's event buffer was full
// are found as gaps in the breaker's generation numbers when its next
// transition arrives, and counted in missed_transitions: once that has
// happened, transitions_total plus missed_transitions is every transition
// since the collector was created. dropped_events_total is the manager's
// count over all its subscribers, and grows at once.
package prommetrics

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/metrics/internal/tally"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultNamespace is the prefix of every metric name when
// Options.Namespace is empty.
const DefaultNamespace = "fusebox"

// Options configure a Collector. The zero value is valid.
type Options struct {
	// Namespace is the first part of every metric name. Empty means
	// DefaultNamespace; otherwise it must be a valid Prometheus name
	// (letters, digits and underscores, not starting with a digit).
	Namespace string
	// ConstLabels are added to every metric, for example to tell several
	// managers of one process apart. The registry rejects invalid ones
	// when the collector is registered.
	ConstLabels prometheus.Labels
	// EventBuffer is the buffer of the collector's subscription to the
	// manager's events. Below 1 means 1024; above manager.MaxSubscribeBuffer
	// is an error. Transitions that arrive while
	// it is full are counted in missed_transitions instead.
	EventBuffer int
}

// Collector is a prometheus.Collector for every breaker of one manager,
// including breakers registered after it was created. Create it with New
// and end it with Close. It is safe for concurrent use.
type Collector struct {
	m     *manager.Manager
	tally *tally.Tally

	state, forced, calls, declined, stale, dropped, transitions, missed *prometheus.Desc
}

// New returns a collector for the breakers of m. It subscribes to m's
// events at once, so transitions are counted from now on; Close ends the
// subscription. New fails if m is nil, Options.Namespace is invalid or
// Options.EventBuffer is too large.
func New(m *manager.Manager, opts Options) (*Collector, error) {
	if m == nil {
		return nil, errors.New("fusebox: prommetrics.New: the manager is nil")
	}
	ns := opts.Namespace
	if ns == "" {
		ns = DefaultNamespace
	} else if !validName(ns) {
		return nil, fmt.Errorf("fusebox: prommetrics.New: Options.Namespace %q is not a valid metric name prefix (letters, digits and underscores, not starting with a digit)", ns)
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "breaker", name), help,
			append([]string{"breaker"}, labels...), opts.ConstLabels)
	}
	t, err := tally.Start(m, opts.EventBuffer)
	if err != nil {
		return nil, fmt.Errorf("fusebox: prommetrics.New: Options.EventBuffer: %w", err)
	}
	return &Collector{
		m:           m,
		tally:       t,
		state:       desc("state", "Whether the breaker is in the state: 1 for its current state, 0 for the others.", "state"),
		forced:      desc("forced_open", "1 while the breaker is forced open by hand, 0 otherwise."),
		calls:       desc("calls_total", "Calls released through the breaker, by outcome.", "outcome"),
		declined:    desc("declined_calls_total", "Calls declined by the breaker while open or probing."),
		stale:       desc("stale_releases_total", "Releases of permits granted before the breaker last changed state; they changed nothing."),
		dropped:     desc("dropped_events_total", "The breaker's events that a subscriber of the manager lost because its buffer was full."),
		transitions: desc("transitions_total", "Transitions of the breaker seen by this collector since it was created.", "from", "to"),
		missed:      desc("missed_transitions_total", "Transitions of the breaker this collector did not see because its event buffer was full."),
	}, nil
}

func validName(s string) bool {
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

// Describe sends the descriptors of every metric the collector produces.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.forced, c.calls, c.declined, c.stale, c.dropped, c.transitions, c.missed} {
		ch <- d
	}
}

var states = [...]breaker.State{breaker.Closed, breaker.Open, breaker.HalfOpen, breaker.Probing}

// Collect sends the current value of every metric of every breaker. The
// transition counts include every event the manager had sent before the
// call: after manager.Manager.Sync, a scrape shows every transition made so
// far. After Close, Collect still reports the breakers' stats and the last
// transition counts.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	counts := c.tally.Counts()
	for _, b := range c.m.Breakers() {
		st := b.Stats()
		name := labelValue(st.Name)
		send := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
			m, err := prometheus.NewConstMetric(d, t, v, append([]string{name}, labels...)...)
			if err != nil {
				m = prometheus.NewInvalidMetric(d, err)
			}
			ch <- m
		}
		for _, s := range states {
			send(c.state, prometheus.GaugeValue, boolValue(st.State == s), s.String())
		}
		send(c.forced, prometheus.GaugeValue, boolValue(st.Forced))
		send(c.calls, prometheus.CounterValue, float64(st.Successes), "success")
		send(c.calls, prometheus.CounterValue, float64(st.Failures), "failure")
		send(c.calls, prometheus.CounterValue, float64(st.Ignored), "ignore")
		send(c.declined, prometheus.CounterValue, float64(st.Declined))
		send(c.stale, prometheus.CounterValue, float64(st.Stale))
		send(c.dropped, prometheus.CounterValue, float64(st.DroppedEvents))
		n := counts[st.Name]
		for _, from := range states {
			for _, to := range states {
				if v := n.Transitions[from][to]; v > 0 {
					send(c.transitions, prometheus.CounterValue, float64(v), from.String(), to.String())
				}
			}
		}
		send(c.missed, prometheus.CounterValue, float64(n.Missed))
	}
}

// labelValue makes a breaker's name a valid label value: Prometheus label
// values must be UTF-8, and a name may come from outside (a request's host).
func labelValue(name string) string { return strings.ToValidUTF8(name, "\uFFFD") }

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Close ends the collector's subscription to the manager's events and waits
// for its goroutine to return. Afterwards the collector still answers
// scrapes, with transition counts frozen. Calling Close more than once does
// nothing more.
func (c *Collector) Close() { c.tally.Close() }

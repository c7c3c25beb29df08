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
//	fusebox_breaker_state{breaker, state}                gauge: 1 for the current state, 0 for the other three
//	fusebox_breaker_forced_open{breaker}                 gauge: 1 while forced open by hand
//	fusebox_breaker_dry_run{breaker}                     gauge: 1 while the breaker is in a dry run (manager.Config.DryRun): it declines no call, whatever its state says
//	fusebox_breaker_open_until_timestamp_seconds{breaker} gauge: when the open period ends, in Unix seconds (manager.Stats.Until); 0 when not open, and while forced open
//	fusebox_breaker_admitted_ratio{breaker}              gauge: the share of calls let through now, 0 to 1 (manager.Stats.Admitted): 1 closed, rising during a slow start, 0 open
//	fusebox_breaker_failure_rate{breaker}                gauge: failures/calls in the strategy's window (FailureRate, TimeWindow only)
//	fusebox_breaker_calls_total{breaker}                 counter: calls that asked for a permit and finished, declined ones included (manager.Stats.Calls)
//	fusebox_breaker_released_calls_total{breaker, outcome} counter: calls let through and released, by outcome (success, failure, ignore)
//	fusebox_breaker_declined_calls_total{breaker}        counter: calls declined by an open or probing breaker
//	fusebox_breaker_slow_calls_total{breaker}            counter: calls that took at least Config.SlowCall, counted as failures
//	fusebox_breaker_would_decline_calls_total{breaker}   counter: calls a breaker in a dry run let through that it would have declined (manager.Config.DryRun only, or once it counted some)
//	fusebox_breaker_stale_releases_total{breaker}        counter: releases of permits from an earlier state
//	fusebox_breaker_dropped_events_total{breaker}        counter: events any subscriber lost to a full buffer
//	fusebox_breaker_transitions_total{breaker, from, to} counter: transitions seen by this collector, from zero for every pair the breaker can make
//	fusebox_breaker_missed_transitions_total{breaker}    counter: transitions this collector lost to a full buffer
//	fusebox_breaker_call_duration_seconds{breaker}       histogram: durations of released calls (manager.Config.TimeCalls only)
//	fusebox_breaker_store_down{breaker}                  gauge: 1 while a shared breaker cannot reach its store (shared breakers only)
//	fusebox_breaker_store_errors_total{breaker}          counter: failed store calls (shared breakers only)
//	fusebox_manager_halted                               gauge: 1 once the manager has stopped (halted after a burst of restarts, or Stop)
//
// The call counters are the manager's own and count from the breaker's
// registration. A call is counted once it has finished, whatever became of
// it: calls_total is released_calls_total, over its outcomes, plus
// declined_calls_total, as manager.Stats.Calls is.
//
// The transition counters count from the collector's creation. Every
// from/to pair a breaker can make is exported, at zero until it happens,
// so that increase() sees a breaker's first trip: for a breaker kept in its
// process, the nine a local state machine makes (a closed breaker never
// becomes half_open or probing, nor an open one probing, without an open
// period's end between them); for a shared one, which also follows the
// fleet's state, all twelve. A pair outside that set that happens anyway
// is exported from then on. Transitions lost because the collector's event
// buffer was full are reported by the manager with the breaker's next
// event, and counted in missed_transitions: once that has happened,
// transitions_total plus missed_transitions is every transition since the
// collector was created. dropped_events_total is the manager's count over
// all its subscribers, and grows at once. A breaker removed from the
// manager (Manager.Remove) disappears from the next scrape with all its
// series.
//
// A scrape writes each value straight into the registry's metric, with
// label pairs built once per breaker: it allocates about as much as plain
// client_golang vectors holding the same series (see BenchmarkScrape).
package prommetrics

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/latency"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/metrics/internal/tally"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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
	// manager's events. Below 1 means 1024; above
	// 262,144 (1<<18) is an error. Transitions that arrive while
	// it is full are counted in missed_transitions instead.
	EventBuffer int
}

// The series of a breaker, in the order of Collector.descs and of each
// breaker's label pairs.
const (
	sState     = 0 // four: one per state
	sForced    = 4
	sCalls     = 5
	sReleased  = 6 // three: success, failure, ignore
	sDeclined  = 9
	sStale     = 10
	sDropped   = 11
	sMissed    = 12
	sTrans     = 13 // twelve: every from != to; Collect skips those a breaker cannot make
	sRate      = 25
	sStoreDown = 26
	sStoreErrs = 27
	sDuration  = 28
	sSlow      = 29
	sAdmitted  = 30
	sWould     = 31
	sDryRun    = 32
	sOpenUntil = 33
	nSeries    = 34
)

var states = [...]breaker.State{breaker.Closed, breaker.Open, breaker.HalfOpen, breaker.Probing}

// transitions are every pair of different states, in the order of the
// transition series; localCan marks those a breaker kept in its process can
// make (tally.Local).
var (
	transitions = tally.Shared
	localCan    = func() (can [12]bool) {
		for i, tr := range transitions {
			for _, l := range tally.Local {
				can[i] = can[i] || tr == l
			}
		}
		return can
	}()
)

var outcomes = [...]string{"success", "failure", "ignore"}

// upperBounds are the bounds of manager.Durations' buckets in seconds,
// shared by every histogram the collector writes.
var upperBounds = func() (b [len(latency.Bounds)]float64) {
	for i, d := range latency.Bounds {
		b[i] = d.Seconds()
	}
	return b
}()

// Collector is a prometheus.Collector for every breaker of one manager,
// including breakers registered after it was created. Create it with New
// and end it with Close. It is safe for concurrent use.
type Collector struct {
	m     *manager.Manager
	tally *tally.Tally
	// descs holds the descriptor of each series index; the four state
	// series share one, and so on.
	descs  [nSeries]*prometheus.Desc
	halted *prometheus.Desc
	consts []*dto.LabelPair

	mu     sync.Mutex // guards labels and scrape
	labels map[*manager.Breaker]*labelSet
	scrape uint64
}

// labelSet is one breaker's label pairs for each of its series, built at
// its first scrape and reused.
type labelSet struct {
	pairs [nSeries][]*dto.LabelPair
	seen  uint64 // the last scrape that saw the breaker
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
	c := &Collector{m: m, labels: make(map[*manager.Breaker]*labelSet)}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "breaker", name), help,
			append([]string{"breaker"}, labels...), opts.ConstLabels)
	}
	fill := func(from, n int, d *prometheus.Desc) {
		for i := from; i < from+n; i++ {
			c.descs[i] = d
		}
	}
	fill(sState, 4, desc("state", "Whether the breaker is in the state: 1 for its current state, 0 for the others.", "state"))
	fill(sForced, 1, desc("forced_open", "1 while the breaker is forced open by hand, 0 otherwise."))
	fill(sCalls, 1, desc("calls_total", "Calls that asked the breaker for a permit and finished: released ones of every outcome, and declined ones."))
	fill(sReleased, 3, desc("released_calls_total", "Calls the breaker let through and that were released, by outcome.", "outcome"))
	fill(sDeclined, 1, desc("declined_calls_total", "Calls declined by the breaker while open or probing."))
	fill(sStale, 1, desc("stale_releases_total", "Releases of permits granted before the breaker last changed state; they changed nothing."))
	fill(sDropped, 1, desc("dropped_events_total", "The breaker's events that a subscriber of the manager lost because its buffer was full."))
	fill(sMissed, 1, desc("missed_transitions_total", "Transitions of the breaker this collector did not see because its event buffer was full."))
	fill(sTrans, 12, desc("transitions_total", "Transitions of the breaker seen by this collector since it was created.", "from", "to"))
	fill(sRate, 1, desc("failure_rate", "Failures divided by calls in the window of the breaker's strategy; while not closed, of the window it opened on."))
	fill(sStoreDown, 1, desc("store_down", "1 while the shared breaker cannot reach its store and follows its fallback, 0 otherwise."))
	fill(sStoreErrs, 1, desc("store_errors_total", "Calls of the shared breaker to its store that failed."))
	fill(sSlow, 1, desc("slow_calls_total", "Calls that took at least the breaker's Config.SlowCall and so counted as failures."))
	fill(sAdmitted, 1, desc("admitted_ratio", "The share of calls the breaker lets through now, from 0 to 1: 1 while closed, rising from 0 to 1 during a slow start after a recovery, 0 while open or probing."))
	fill(sWould, 1, desc("would_decline_calls_total", "Calls the breaker, in a dry run, let through that it would have declined; not in calls_total's declined ones."))
	fill(sDryRun, 1, desc("dry_run", "1 while the breaker is in a dry run (Config.DryRun): it decides, opens and probes as usual but declines no call; 0 otherwise."))
	fill(sOpenUntil, 1, desc("open_until_timestamp_seconds", "When the breaker's open period ends (its next trial), in seconds since the Unix epoch; 0 while the breaker is not open, and while it is forced open (no period ends it)."))
	fill(sDuration, 1, desc("call_duration_seconds", "Durations of the calls released through the breaker."))
	c.halted = prometheus.NewDesc(prometheus.BuildFQName(ns, "manager", "halted"),
		"1 once the manager has stopped: halted after a burst of restarts, or stopped; its breakers then refuse every call.", nil, opts.ConstLabels)
	for k, v := range opts.ConstLabels {
		c.consts = append(c.consts, pair(k, v))
	}
	t, err := tally.Start(m, opts.EventBuffer)
	if err != nil {
		return nil, fmt.Errorf("fusebox: prommetrics.New: Options.EventBuffer: %w", err)
	}
	c.tally = t
	return c, nil
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

func pair(name, value string) *dto.LabelPair { return &dto.LabelPair{Name: &name, Value: &value} }

// Describe sends the descriptors of every metric the collector produces.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	var last *prometheus.Desc
	for _, d := range c.descs {
		if d != last {
			ch <- d
			last = d
		}
	}
	ch <- c.halted
}

// labelsOf returns b's label pairs, building them at its first scrape, and
// marks b as seen in this scrape.
func (c *Collector) labelsOf(b *manager.Breaker, scrape uint64) *labelSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	ls := c.labels[b]
	if ls == nil {
		ls = newLabelSet(b.Name(), c.consts)
		c.labels[b] = ls
	}
	ls.seen = scrape
	return ls
}

func newLabelSet(name string, consts []*dto.LabelPair) *labelSet {
	ls := new(labelSet)
	bp := pair("breaker", labelValue(name))
	mk := func(extra ...*dto.LabelPair) []*dto.LabelPair {
		ps := append(append([]*dto.LabelPair{bp}, consts...), extra...)
		sort.Slice(ps, func(i, j int) bool { return ps[i].GetName() < ps[j].GetName() })
		return ps
	}
	plain := mk()
	for i := range ls.pairs {
		ls.pairs[i] = plain
	}
	for i, s := range states {
		ls.pairs[sState+i] = mk(pair("state", s.String()))
	}
	for i, o := range outcomes {
		ls.pairs[sReleased+i] = mk(pair("outcome", o))
	}
	for i, tr := range transitions {
		ls.pairs[sTrans+i] = mk(pair("from", tr.From.String()), pair("to", tr.To.String()))
	}
	return ls
}

// labelValue makes a breaker's name a valid label value: Prometheus label
// values must be UTF-8, and a name may come from outside (a request's host).
func labelValue(name string) string {
	if utf8.ValidString(name) {
		return name
	}
	return strings.ToValidUTF8(name, "\uFFFD")
}

// sample is one series' value at one scrape, written into the registry's
// metric by Write. A scrape allocates the samples of a breaker in one
// slice.
type sample struct {
	desc    *prometheus.Desc
	labels  []*dto.LabelPair
	value   float64
	counter bool
	gauge   dto.Gauge
	count   dto.Counter
	hist    *histogram
}

// Desc implements prometheus.Metric.
func (s *sample) Desc() *prometheus.Desc { return s.desc }

// Write implements prometheus.Metric.
func (s *sample) Write(m *dto.Metric) error {
	m.Label = s.labels
	switch {
	case s.hist != nil:
		m.Histogram = &s.hist.h
	case s.counter:
		s.count.Value = &s.value
		m.Counter = &s.count
	default:
		s.gauge.Value = &s.value
		m.Gauge = &s.gauge
	}
	return nil
}

// histogram is one breaker's call durations at one scrape, in one
// allocation.
type histogram struct {
	h       dto.Histogram
	buckets [len(upperBounds)]dto.Bucket
	ptrs    [len(upperBounds)]*dto.Bucket
	cum     [len(upperBounds)]uint64
	count   uint64
	sum     float64
}

func newHistogram(d *manager.Durations) *histogram {
	h := new(histogram)
	var cum uint64
	for i := range h.buckets {
		cum += d.Buckets[i]
		h.cum[i] = cum
		h.buckets[i] = dto.Bucket{CumulativeCount: &h.cum[i], UpperBound: &upperBounds[i]}
		h.ptrs[i] = &h.buckets[i]
	}
	h.count, h.sum = d.Count, d.Sum.Seconds()
	h.h = dto.Histogram{SampleCount: &h.count, SampleSum: &h.sum, Bucket: h.ptrs[:]}
	return h
}

// Collect sends the current value of every metric of every breaker. The
// transition counts include every event the manager had sent before the
// call: after manager.Manager.Sync, a scrape shows every transition made so
// far. After Close, Collect still reports the breakers' stats and the last
// transition counts.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.tally.Sync()
	c.mu.Lock()
	c.scrape++
	scrape := c.scrape
	c.mu.Unlock()

	halted := 0.0
	select {
	case <-c.m.Done():
		halted = 1
	default:
	}
	ch <- prometheus.MustNewConstMetric(c.halted, prometheus.GaugeValue, halted)

	bs := c.m.Breakers()
	for _, b := range bs {
		st := b.Stats()
		ls := c.labelsOf(b, scrape)
		n := c.tally.Get(st.Name)
		samples := make([]sample, nSeries)
		set := func(i int, v float64, counter bool) {
			samples[i] = sample{desc: c.descs[i], labels: ls.pairs[i], value: v, counter: counter}
			ch <- &samples[i]
		}
		for i, s := range states {
			set(sState+i, boolValue(st.State == s), false)
		}
		set(sForced, boolValue(st.Forced), false)
		set(sDryRun, boolValue(st.DryRun), false)
		set(sOpenUntil, openUntil(st), false)
		set(sAdmitted, st.Admitted, false)
		set(sCalls, float64(st.Calls), true)
		set(sReleased, float64(st.Successes), true)
		set(sReleased+1, float64(st.Failures), true)
		set(sReleased+2, float64(st.Ignored), true)
		set(sDeclined, float64(st.Declined), true)
		set(sStale, float64(st.Stale), true)
		set(sSlow, float64(st.SlowCalls), true)
		set(sDropped, float64(st.DroppedEvents), true)
		set(sMissed, float64(n.Missed), true)
		for i, tr := range transitions {
			if c := n.Of(tr); c > 0 || st.Shared || localCan[i] {
				set(sTrans+i, float64(c), true)
			}
		}
		if st.Windowed {
			rate := 0.0
			if st.WindowCalls > 0 {
				rate = float64(st.WindowFailures) / float64(st.WindowCalls)
			}
			set(sRate, rate, false)
		}
		if st.DryRun || st.WouldDecline > 0 {
			set(sWould, float64(st.WouldDecline), true)
		}
		if st.Shared {
			set(sStoreDown, boolValue(st.StoreDown), false)
			set(sStoreErrs, float64(st.StoreErrors), true)
		}
		if st.Durations != nil {
			samples[sDuration] = sample{desc: c.descs[sDuration], labels: ls.pairs[sDuration], hist: newHistogram(st.Durations)}
			ch <- &samples[sDuration]
		}
	}
	c.forget(scrape, len(bs))
}

// forget drops the label pairs of the breakers this scrape did not see:
// they were removed.
func (c *Collector) forget(scrape uint64, seen int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.labels) <= seen {
		return
	}
	for b, ls := range c.labels {
		if ls.seen < scrape {
			delete(c.labels, b)
		}
	}
}

// openUntil is when the open period of st ends, in Unix seconds, or 0
// when st is not open or its period has no end (forced).
func openUntil(st manager.Stats) float64 {
	if st.State != breaker.Open || st.Until.IsZero() {
		return 0
	}
	return float64(st.Until.UnixNano()) / 1e9
}

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

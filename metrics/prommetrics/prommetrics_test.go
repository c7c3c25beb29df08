package prommetrics_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/metrics/prommetrics"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errDown = errors.New("service down")

func fail(context.Context) error    { return errDown }
func succeed(context.Context) error { return nil }
func cancel(context.Context) error  { return context.Canceled }

// setup starts a manager on a mock clock with one breaker, "payments",
// that trips on the second failure in a row and stays open 10s.
func setup(t *testing.T, opts prommetrics.Options) (*clock.Mock, *manager.Manager, *manager.Breaker, *prommetrics.Collector, *prometheus.Registry) {
	t.Helper()
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	t.Cleanup(m.Stop)
	b, err := m.Register("payments", manager.Config{
		Strategy: breaker.Consecutive{Failures: 2},
		Recover:  recover.BasicTimeout{Open: 10 * time.Second},
	})
	require.NoError(t, err)
	c, err := prommetrics.New(m, opts)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))
	return mock, m, b, c, reg
}

func TestCollectorAfterScriptedCalls(t *testing.T) {
	mock, m, b, _, reg := setup(t, prommetrics.Options{})
	ctx := context.Background()

	// Three successes and one ignored call while closed.
	for range 3 {
		require.NoError(t, b.Do(ctx, succeed))
	}
	require.ErrorIs(t, b.Do(ctx, cancel), context.Canceled)
	// A permit granted now goes stale when the breaker trips.
	early, err := b.Acquire(ctx)
	require.NoError(t, err)
	// Two failures in a row trip it: closed -> open.
	require.ErrorIs(t, b.Do(ctx, fail), errDown)
	require.ErrorIs(t, b.Do(ctx, fail), errDown)
	require.Equal(t, breaker.Open, b.State())
	early.Release(nil) // stale: counted as a success and as stale
	// Three calls declined while open.
	for range 3 {
		require.ErrorIs(t, b.Do(ctx, succeed), breaker.ErrOpen)
	}
	// The open period ends: open -> half_open; the probe fails:
	// half_open -> probing -> open.
	mock.Add(10 * time.Second)
	m.Sync()
	require.Equal(t, breaker.HalfOpen, b.State())
	require.ErrorIs(t, b.Do(ctx, fail), errDown)
	require.Equal(t, breaker.Open, b.State())
	// Next period: the probe succeeds: half_open -> probing -> closed.
	mock.Add(10 * time.Second)
	m.Sync()
	require.NoError(t, b.Do(ctx, succeed))
	require.Equal(t, breaker.Closed, b.State())
	// Forced open by hand: closed -> open, and one more declined call.
	require.NoError(t, b.ForceOpen())
	require.ErrorIs(t, b.Do(ctx, succeed), breaker.ErrOpen)

	// A breaker registered after the collector was created is reported
	// too, with its transitions.
	s, err := m.Register("search", manager.Config{})
	require.NoError(t, err)
	require.NoError(t, s.ForceOpen())
	require.NoError(t, s.Reset())
	m.Sync()

	want := `
# HELP fusebox_breaker_admitted_ratio The share of calls the breaker lets through now, from 0 to 1: 1 while closed, rising from 0 to 1 during a slow start after a recovery, 0 while open or probing.
# TYPE fusebox_breaker_admitted_ratio gauge
fusebox_breaker_admitted_ratio{breaker="payments"} 0
fusebox_breaker_admitted_ratio{breaker="search"} 1
# HELP fusebox_breaker_calls_total Calls that asked the breaker for a permit and finished: released ones of every outcome, and declined ones.
# TYPE fusebox_breaker_calls_total counter
fusebox_breaker_calls_total{breaker="payments"} 13
fusebox_breaker_calls_total{breaker="search"} 0
# HELP fusebox_breaker_declined_calls_total Calls declined by the breaker while open or probing.
# TYPE fusebox_breaker_declined_calls_total counter
fusebox_breaker_declined_calls_total{breaker="payments"} 4
fusebox_breaker_declined_calls_total{breaker="search"} 0
# HELP fusebox_breaker_dropped_events_total The breaker's events that a subscriber of the manager lost because its buffer was full.
# TYPE fusebox_breaker_dropped_events_total counter
fusebox_breaker_dropped_events_total{breaker="payments"} 0
fusebox_breaker_dropped_events_total{breaker="search"} 0
# HELP fusebox_breaker_dry_run 1 while the breaker is in a dry run (Config.DryRun): it decides, opens and probes as usual but declines no call; 0 otherwise.
# TYPE fusebox_breaker_dry_run gauge
fusebox_breaker_dry_run{breaker="payments"} 0
fusebox_breaker_dry_run{breaker="search"} 0
# HELP fusebox_breaker_forced_open 1 while the breaker is forced open by hand, 0 otherwise.
# TYPE fusebox_breaker_forced_open gauge
fusebox_breaker_forced_open{breaker="payments"} 1
fusebox_breaker_forced_open{breaker="search"} 0
# HELP fusebox_breaker_missed_transitions_total Transitions of the breaker this collector did not see because its event buffer was full.
# TYPE fusebox_breaker_missed_transitions_total counter
fusebox_breaker_missed_transitions_total{breaker="payments"} 0
fusebox_breaker_missed_transitions_total{breaker="search"} 0
# HELP fusebox_breaker_open_until_timestamp_seconds When the breaker's open period ends (its next trial), in seconds since the Unix epoch; 0 while the breaker is not open, and while it is forced open (no period ends it).
# TYPE fusebox_breaker_open_until_timestamp_seconds gauge
fusebox_breaker_open_until_timestamp_seconds{breaker="payments"} 0
fusebox_breaker_open_until_timestamp_seconds{breaker="search"} 0
# HELP fusebox_breaker_released_calls_total Calls the breaker let through and that were released, by outcome.
# TYPE fusebox_breaker_released_calls_total counter
fusebox_breaker_released_calls_total{breaker="payments",outcome="failure"} 3
fusebox_breaker_released_calls_total{breaker="payments",outcome="ignore"} 1
fusebox_breaker_released_calls_total{breaker="payments",outcome="success"} 5
fusebox_breaker_released_calls_total{breaker="search",outcome="failure"} 0
fusebox_breaker_released_calls_total{breaker="search",outcome="ignore"} 0
fusebox_breaker_released_calls_total{breaker="search",outcome="success"} 0
# HELP fusebox_breaker_slow_calls_total Calls that took at least the breaker's Config.SlowCall and so counted as failures.
# TYPE fusebox_breaker_slow_calls_total counter
fusebox_breaker_slow_calls_total{breaker="payments"} 0
fusebox_breaker_slow_calls_total{breaker="search"} 0
# HELP fusebox_breaker_stale_releases_total Releases of permits granted before the breaker last changed state; they changed nothing.
# TYPE fusebox_breaker_stale_releases_total counter
fusebox_breaker_stale_releases_total{breaker="payments"} 1
fusebox_breaker_stale_releases_total{breaker="search"} 0
# HELP fusebox_breaker_state Whether the breaker is in the state: 1 for its current state, 0 for the others.
# TYPE fusebox_breaker_state gauge
fusebox_breaker_state{breaker="payments",state="closed"} 0
fusebox_breaker_state{breaker="payments",state="half_open"} 0
fusebox_breaker_state{breaker="payments",state="open"} 1
fusebox_breaker_state{breaker="payments",state="probing"} 0
fusebox_breaker_state{breaker="search",state="closed"} 1
fusebox_breaker_state{breaker="search",state="half_open"} 0
fusebox_breaker_state{breaker="search",state="open"} 0
fusebox_breaker_state{breaker="search",state="probing"} 0
# HELP fusebox_breaker_transitions_total Transitions of the breaker seen by this collector since it was created.
# TYPE fusebox_breaker_transitions_total counter
fusebox_breaker_transitions_total{breaker="payments",from="closed",to="open"} 2
fusebox_breaker_transitions_total{breaker="payments",from="half_open",to="closed"} 0
fusebox_breaker_transitions_total{breaker="payments",from="half_open",to="open"} 0
fusebox_breaker_transitions_total{breaker="payments",from="half_open",to="probing"} 2
fusebox_breaker_transitions_total{breaker="payments",from="open",to="closed"} 0
fusebox_breaker_transitions_total{breaker="payments",from="open",to="half_open"} 2
fusebox_breaker_transitions_total{breaker="payments",from="probing",to="closed"} 1
fusebox_breaker_transitions_total{breaker="payments",from="probing",to="half_open"} 0
fusebox_breaker_transitions_total{breaker="payments",from="probing",to="open"} 1
fusebox_breaker_transitions_total{breaker="search",from="closed",to="open"} 1
fusebox_breaker_transitions_total{breaker="search",from="half_open",to="closed"} 0
fusebox_breaker_transitions_total{breaker="search",from="half_open",to="open"} 0
fusebox_breaker_transitions_total{breaker="search",from="half_open",to="probing"} 0
fusebox_breaker_transitions_total{breaker="search",from="open",to="closed"} 1
fusebox_breaker_transitions_total{breaker="search",from="open",to="half_open"} 0
fusebox_breaker_transitions_total{breaker="search",from="probing",to="closed"} 0
fusebox_breaker_transitions_total{breaker="search",from="probing",to="half_open"} 0
fusebox_breaker_transitions_total{breaker="search",from="probing",to="open"} 0
# HELP fusebox_manager_halted 1 once the manager has stopped: halted after a burst of restarts, or stopped; its breakers then refuse every call.
# TYPE fusebox_manager_halted gauge
fusebox_manager_halted 0
`
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want)))

	// The registry's own consistency checks pass (help, types, names).
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// With a buffer of one event the collector loses transitions whenever the
// manager outpaces it; however many it loses, it says so. A lost transition
// shows as a gap once the breaker's next one arrives: after one more
// transition delivered into an empty buffer, seen plus missed is every
// transition, and missed equals what the manager counted as dropped (the
// collector is its only subscriber).
func TestCollectorCountsMissedTransitions(t *testing.T) {
	_, m, b, _, reg := setup(t, prommetrics.Options{EventBuffer: 1})
	const rounds = 500
	for range rounds {
		require.NoError(t, b.ForceOpen())
		require.NoError(t, b.Reset())
	}
	m.Sync()
	_, err := reg.Gather() // empties the collector's buffer
	require.NoError(t, err)
	require.NoError(t, b.ForceOpen())
	m.Sync()

	families, err := reg.Gather()
	require.NoError(t, err)
	var seen, missed float64
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			switch f.GetName() {
			case "fusebox_breaker_transitions_total":
				seen += mt.GetCounter().GetValue()
			case "fusebox_breaker_missed_transitions_total":
				missed += mt.GetCounter().GetValue()
			}
		}
	}
	assert.Equal(t, float64(2*rounds+1), seen+missed, "seen %v + missed %v", seen, missed)
	assert.Equal(t, float64(b.Stats().DroppedEvents), missed)
	t.Logf("seen %v, missed %v", seen, missed)
}

func TestCollectorOptions(t *testing.T) {
	_, _, b, _, reg := setup(t, prommetrics.Options{
		Namespace:   "shop",
		ConstLabels: prometheus.Labels{"manager": "edge"},
	})
	require.NoError(t, b.ForceOpen())
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP shop_breaker_forced_open 1 while the breaker is forced open by hand, 0 otherwise.
# TYPE shop_breaker_forced_open gauge
shop_breaker_forced_open{breaker="payments",manager="edge"} 1
`), "shop_breaker_forced_open"))
}

func TestNewRejectsBadInput(t *testing.T) {
	_, err := prommetrics.New(nil, prommetrics.Options{})
	assert.ErrorContains(t, err, "manager is nil")

	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()
	for _, ns := range []string{"9lives", "has-dash", "dot.ted", "spa ce"} {
		_, err := prommetrics.New(m, prommetrics.Options{Namespace: ns})
		assert.ErrorContains(t, err, "Options.Namespace", "namespace %q", ns)
	}
	_, err = prommetrics.New(m, prommetrics.Options{EventBuffer: math.MaxInt})
	assert.ErrorContains(t, err, "Options.EventBuffer")
}

// A breaker's name may come from outside, for example a request's host;
// quotes, backslashes and markup make valid label values. (A name that is
// not UTF-8 is refused by Register.)
func TestCollectorOddNames(t *testing.T) {
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()
	for _, name := range []string{`quote"and\back`, "<script>alert(1)</script>"} {
		_, err := m.Register(name, manager.Config{})
		require.NoError(t, err)
	}
	c, err := prommetrics.New(m, prommetrics.Options{})
	require.NoError(t, err)
	defer c.Close()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP fusebox_breaker_forced_open 1 while the breaker is forced open by hand, 0 otherwise.
# TYPE fusebox_breaker_forced_open gauge
fusebox_breaker_forced_open{breaker="<script>alert(1)</script>"} 0
fusebox_breaker_forced_open{breaker="quote\"and\\back"} 0
`), "fusebox_breaker_forced_open"))
}

// After Close and after the manager stops, scrapes still answer with the
// breakers' stats; Close may be called again.
func TestCollectorAfterClose(t *testing.T) {
	_, m, b, c, reg := setup(t, prommetrics.Options{})
	require.NoError(t, b.ForceOpen())
	m.Sync()
	c.Close()
	c.Close()
	m.Stop()
	got, err := testutil.GatherAndCount(reg, "fusebox_breaker_transitions_total")
	require.NoError(t, err)
	assert.Equal(t, 9, got, "every pair a breaker kept in its process can make")
	assert.Equal(t, 1.0, testutil.ToFloat64(onlyMetric{c, "fusebox_manager_halted"}))
	assert.Equal(t, 1.0, testutil.ToFloat64(onlyMetric{c, "fusebox_breaker_forced_open"}))
}

// onlyMetric is a collector that passes on the one metric of c named name,
// for testutil.ToFloat64.
type onlyMetric struct {
	c    prometheus.Collector
	name string
}

func (o onlyMetric) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(o, ch) }

func (o onlyMetric) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric)
	go func() { o.c.Collect(all); close(all) }()
	for m := range all {
		if strings.Contains(m.Desc().String(), fmt.Sprintf("fqName: %q", o.name)) {
			ch <- m
		}
	}
}

// A breaker in a dry run exports the calls it would have declined, from
// zero; the others export no such series. No error text reaches a metric,
// not even the one that opened the breaker.
func TestCollectorDryRun(t *testing.T) {
	_, m, b, _, reg := setup(t, prommetrics.Options{})
	ctx := context.Background()
	dry, err := m.Register("search", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, DryRun: true})
	require.NoError(t, err)
	want := `
# HELP fusebox_breaker_would_decline_calls_total Calls the breaker, in a dry run, let through that it would have declined; not in calls_total's declined ones.
# TYPE fusebox_breaker_would_decline_calls_total counter
fusebox_breaker_would_decline_calls_total{breaker="search"} %d
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(want, 0)), "fusebox_breaker_would_decline_calls_total"))
	require.ErrorIs(t, dry.Do(ctx, fail), errDown) // trips it
	require.ErrorIs(t, dry.Do(ctx, fail), errDown) // let through
	require.NoError(t, dry.Do(ctx, succeed))       // let through
	require.ErrorIs(t, b.Do(ctx, fail), errDown)
	require.ErrorIs(t, b.Do(ctx, fail), errDown)
	m.Sync()
	require.Equal(t, breaker.Open, dry.State())
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(want, 2)), "fusebox_breaker_would_decline_calls_total"))

	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		assert.NotContains(t, mf.String(), errDown.Error(), "metric %s", mf.GetName())
	}
}

// dry_run marks a breaker in a dry run, 1 in every state (an alert on
// its state must not page for it), 0 for the others; the open period's end
// is exported while open, and is 0 again once the period is over.
func TestCollectorDryRunAndOpenUntil(t *testing.T) {
	mock, m, b, _, reg := setup(t, prommetrics.Options{})
	ctx := context.Background()
	dry, err := m.Register("search", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, DryRun: true})
	require.NoError(t, err)
	series := func(dry float64, until [2]float64) string {
		return fmt.Sprintf(`
# HELP fusebox_breaker_dry_run 1 while the breaker is in a dry run (Config.DryRun): it decides, opens and probes as usual but declines no call; 0 otherwise.
# TYPE fusebox_breaker_dry_run gauge
fusebox_breaker_dry_run{breaker="payments"} 0
fusebox_breaker_dry_run{breaker="search"} %v
# HELP fusebox_breaker_open_until_timestamp_seconds When the breaker's open period ends (its next trial), in seconds since the Unix epoch; 0 while the breaker is not open, and while it is forced open (no period ends it).
# TYPE fusebox_breaker_open_until_timestamp_seconds gauge
fusebox_breaker_open_until_timestamp_seconds{breaker="payments"} %v
fusebox_breaker_open_until_timestamp_seconds{breaker="search"} %v
`, dry, until[0], until[1])
	}
	names := []string{"fusebox_breaker_dry_run", "fusebox_breaker_open_until_timestamp_seconds"}
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(series(1, [2]float64{0, 0})), names...))

	opened := mock.Now()
	require.ErrorIs(t, b.Do(ctx, fail), errDown)
	require.ErrorIs(t, b.Do(ctx, fail), errDown)
	require.ErrorIs(t, dry.Do(ctx, fail), errDown)
	m.Sync()
	require.Equal(t, breaker.Open, b.State())
	require.Equal(t, breaker.Open, dry.State())
	// payments stays open 10s; search has the default 30s.
	end := func(d time.Duration) float64 { return float64(opened.Add(d).UnixNano()) / 1e9 }
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(series(1, [2]float64{end(10 * time.Second), end(30 * time.Second)})), names...))

	mock.Add(10 * time.Second)
	m.Sync()
	require.Equal(t, breaker.HalfOpen, b.State())
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(series(1, [2]float64{0, end(30 * time.Second)})), names...))
}

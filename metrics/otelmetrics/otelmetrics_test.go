package otelmetrics_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/metrics/otelmetrics"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errDown = errors.New("service down")

func fail(context.Context) error    { return errDown }
func succeed(context.Context) error { return nil }
func cancel(context.Context) error  { return context.Canceled }

type fixture struct {
	mock   *clock.Mock
	m      *manager.Manager
	b      *manager.Breaker
	reg    *otelmetrics.Registration
	reader *sdkmetric.ManualReader
}

// setup starts a manager on a mock clock with one breaker, "payments",
// that trips on the second failure in a row and stays open 10s, and
// registers the adapter with a meter read by a ManualReader.
func setup(t *testing.T, opts otelmetrics.Options) *fixture {
	t.Helper()
	f := &fixture{mock: clock.NewMock()}
	f.m = manager.Start(manager.Options{Clock: f.mock})
	t.Cleanup(f.m.Stop)
	var err error
	f.b, err = f.m.Register("payments", manager.Config{
		Strategy: breaker.Consecutive{Failures: 2},
		Recover:  recover.BasicTimeout{Open: 10 * time.Second},
	})
	require.NoError(t, err)
	f.reader = sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(f.reader))
	t.Cleanup(func() { require.NoError(t, provider.Shutdown(context.Background())) })
	opts.MeterProvider = provider
	f.reg, err = otelmetrics.Register(f.m, opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, f.reg.Close()) })
	return f
}

// collect reads every instrument as "name{k=v,...}" -> value, and checks
// each instrument's kind: counters are cumulative monotonic sums, the
// others gauges.
func (f *fixture) collect(t *testing.T) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, f.reader.Collect(context.Background(), &rm))
	out := make(map[string]int64)
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			var points []metricdata.DataPoint[int64]
			switch data := mt.Data.(type) {
			case metricdata.Gauge[float64]:
				assert.True(t, isGauge(mt.Name), "%s: a counter reported as a gauge", mt.Name)
				for _, p := range data.DataPoints {
					out[mt.Name+key(p.Attributes)] = int64(math.Round(p.Value * 1000)) // in thousandths
				}
			case metricdata.Sum[int64]:
				assert.True(t, data.IsMonotonic, "%s is monotonic", mt.Name)
				assert.Equal(t, metricdata.CumulativeTemporality, data.Temporality, "%s is cumulative", mt.Name)
				assert.False(t, isGauge(mt.Name), "%s: a gauge reported as a sum", mt.Name)
				points = data.DataPoints
			case metricdata.Gauge[int64]:
				assert.True(t, isGauge(mt.Name), "%s: a counter reported as a gauge", mt.Name)
				points = data.DataPoints
			default:
				t.Fatalf("%s: unexpected data %T", mt.Name, mt.Data)
			}
			for _, p := range points {
				out[mt.Name+key(p.Attributes)] = p.Value
			}
		}
	}
	return out
}

func isGauge(name string) bool {
	for _, g := range []string{".breaker.state", ".breaker.forced_open", ".breaker.admitted_ratio", ".breaker.failure_rate", ".breaker.store_down", ".breaker.dry_run", ".breaker.open_until_timestamp_seconds", ".manager.halted"} {
		if strings.HasSuffix(name, g) {
			return true
		}
	}
	return false
}

func key(s attribute.Set) string {
	var kv []string
	for _, a := range s.ToSlice() {
		kv = append(kv, fmt.Sprintf("%s=%v", a.Key, a.Value.AsInterface()))
	}
	sort.Strings(kv)
	return "{" + strings.Join(kv, ",") + "}"
}

func TestAdapterAfterScriptedCalls(t *testing.T) {
	f := setup(t, otelmetrics.Options{})
	b, ctx := f.b, context.Background()

	for range 3 {
		require.NoError(t, b.Do(ctx, succeed))
	}
	require.ErrorIs(t, b.Do(ctx, cancel), context.Canceled)
	early, err := b.Acquire(ctx)
	require.NoError(t, err)
	require.ErrorIs(t, b.Do(ctx, fail), errDown)
	require.ErrorIs(t, b.Do(ctx, fail), errDown) // trips: closed -> open
	early.Release(nil)                           // stale
	for range 3 {
		require.ErrorIs(t, b.Do(ctx, succeed), breaker.ErrOpen)
	}
	f.mock.Add(10 * time.Second)
	f.m.Sync()                                   // open -> half_open
	require.ErrorIs(t, b.Do(ctx, fail), errDown) // half_open -> probing -> open
	f.mock.Add(10 * time.Second)
	f.m.Sync()                             // open -> half_open
	require.NoError(t, b.Do(ctx, succeed)) // half_open -> probing -> closed
	require.Equal(t, breaker.Closed, b.State())
	require.NoError(t, b.ForceOpen()) // closed -> open, forced
	require.ErrorIs(t, b.Do(ctx, succeed), breaker.ErrOpen)

	s, err := f.m.Register("search", manager.Config{})
	require.NoError(t, err)
	require.NoError(t, s.ForceOpen())
	require.NoError(t, s.Reset())
	f.m.Sync()

	want := map[string]int64{
		"fusebox.breaker.state{breaker=payments,state=closed}":    0,
		"fusebox.breaker.state{breaker=payments,state=open}":      1,
		"fusebox.breaker.state{breaker=payments,state=half_open}": 0,
		"fusebox.breaker.state{breaker=payments,state=probing}":   0,
		"fusebox.breaker.state{breaker=search,state=closed}":      1,
		"fusebox.breaker.state{breaker=search,state=open}":        0,
		"fusebox.breaker.state{breaker=search,state=half_open}":   0,
		"fusebox.breaker.state{breaker=search,state=probing}":     0,
		"fusebox.breaker.forced_open{breaker=payments}":           1,
		"fusebox.breaker.forced_open{breaker=search}":             0,
		"fusebox.breaker.dry_run{breaker=payments}":               0,
		"fusebox.breaker.dry_run{breaker=search}":                 0,
		// payments is forced open: no period ends it.
		"fusebox.breaker.open_until_timestamp_seconds{breaker=payments}": 0,
		"fusebox.breaker.open_until_timestamp_seconds{breaker=search}":   0,

		"fusebox.breaker.admitted_ratio{breaker=payments}":                 0,
		"fusebox.breaker.admitted_ratio{breaker=search}":                   1000, // in thousandths
		"fusebox.breaker.calls{breaker=payments}":                          13,
		"fusebox.breaker.calls{breaker=search}":                            0,
		"fusebox.breaker.released_calls{breaker=payments,outcome=success}": 5,
		"fusebox.breaker.released_calls{breaker=payments,outcome=failure}": 3,
		"fusebox.breaker.released_calls{breaker=payments,outcome=ignore}":  1,
		"fusebox.breaker.released_calls{breaker=search,outcome=success}":   0,
		"fusebox.breaker.released_calls{breaker=search,outcome=failure}":   0,
		"fusebox.breaker.released_calls{breaker=search,outcome=ignore}":    0,
		"fusebox.breaker.declined_calls{breaker=payments}":                 4,
		"fusebox.breaker.declined_calls{breaker=search}":                   0,
		"fusebox.breaker.stale_releases{breaker=payments}":                 1,
		"fusebox.breaker.stale_releases{breaker=search}":                   0,
		"fusebox.breaker.slow_calls{breaker=payments}":                     0,
		"fusebox.breaker.slow_calls{breaker=search}":                       0,
		"fusebox.breaker.dropped_events{breaker=payments}":                 0,
		"fusebox.breaker.dropped_events{breaker=search}":                   0,

		"fusebox.breaker.missed_transitions{breaker=payments}": 0,
		"fusebox.breaker.missed_transitions{breaker=search}":   0,
		"fusebox.manager.halted{}":                             0,
	}
	// Every pair of states a local breaker can make has its series, at
	// zero until it happens: not closed->half_open, closed->probing nor
	// open->probing.
	for _, name := range []string{"payments", "search"} {
		for _, from := range states {
			for _, to := range states {
				if from != to && !(from == "closed" && to != "open") && !(from == "open" && to == "probing") {
					want[fmt.Sprintf("fusebox.breaker.transitions{breaker=%s,from=%s,to=%s}", name, from, to)] = 0
				}
			}
		}
	}
	for k, v := range map[string]int64{
		"payments,from=closed,to=open":       2,
		"payments,from=open,to=half_open":    2,
		"payments,from=half_open,to=probing": 2,
		"payments,from=probing,to=open":      1,
		"payments,from=probing,to=closed":    1,
		"search,from=closed,to=open":         1,
		"search,from=open,to=closed":         1,
	} {
		want["fusebox.breaker.transitions{breaker="+k+"}"] = v
	}
	assert.Equal(t, want, f.collect(t))

	// Counters are cumulative: a second collection after more calls adds
	// to the first.
	require.NoError(t, b.Reset())
	require.NoError(t, b.Do(ctx, succeed))
	f.m.Sync()
	got := f.collect(t)
	assert.Equal(t, int64(6), got["fusebox.breaker.released_calls{breaker=payments,outcome=success}"])
	assert.Equal(t, int64(14), got["fusebox.breaker.calls{breaker=payments}"], "calls are Stats.Calls, declined ones included")
	assert.Equal(t, int64(1), got["fusebox.breaker.transitions{breaker=payments,from=open,to=closed}"])
	assert.Equal(t, int64(1), got["fusebox.breaker.state{breaker=payments,state=closed}"])
}

var states = []string{"closed", "open", "half_open", "probing"}

func TestAdapterOptions(t *testing.T) {
	f := setup(t, otelmetrics.Options{
		Prefix:     "shop",
		Attributes: []attribute.KeyValue{attribute.String("manager", "edge")},
	})
	require.NoError(t, f.b.ForceOpen())
	got := f.collect(t)
	assert.Equal(t, int64(1), got["shop.breaker.forced_open{breaker=payments,manager=edge}"], "got %v", got)
	assert.Equal(t, int64(1), got["shop.breaker.state{breaker=payments,manager=edge,state=open}"])
}

// However many transitions a one-event buffer loses, the adapter says so
// once the breaker's next transition arrives (see the package doc).
func TestAdapterCountsMissedTransitions(t *testing.T) {
	f := setup(t, otelmetrics.Options{EventBuffer: 1})
	const rounds = 500
	for range rounds {
		require.NoError(t, f.b.ForceOpen())
		require.NoError(t, f.b.Reset())
	}
	f.m.Sync()
	f.collect(t) // empties the adapter's buffer
	require.NoError(t, f.b.ForceOpen())
	f.m.Sync()

	got := f.collect(t)
	var seen int64
	for k, v := range got {
		if strings.HasPrefix(k, "fusebox.breaker.transitions{") {
			seen += v
		}
	}
	missed := got["fusebox.breaker.missed_transitions{breaker=payments}"]
	assert.Equal(t, int64(2*rounds+1), seen+missed, "seen %d + missed %d", seen, missed)
	assert.Equal(t, int64(f.b.Stats().DroppedEvents), missed)
}

// After Close the instruments report nothing more.
func TestAdapterClose(t *testing.T) {
	f := setup(t, otelmetrics.Options{})
	require.NotEmpty(t, f.collect(t))
	require.NoError(t, f.reg.Close())
	require.NoError(t, f.reg.Close())
	assert.Empty(t, f.collect(t))
}

func TestRegisterRejectsBadInput(t *testing.T) {
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { require.NoError(t, provider.Shutdown(context.Background())) }()
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()

	_, err := otelmetrics.Register(nil, otelmetrics.Options{MeterProvider: provider})
	assert.ErrorContains(t, err, "manager is nil")
	_, err = otelmetrics.Register(m, otelmetrics.Options{MeterProvider: provider, Prefix: "9 bad name"})
	assert.ErrorContains(t, err, `"9 bad name.breaker.state"`)
	_, err = otelmetrics.Register(m, otelmetrics.Options{MeterProvider: provider, EventBuffer: math.MaxInt})
	assert.ErrorContains(t, err, "Options.EventBuffer")
}

// A shared breaker, which follows the fleet's state too, reports every
// pair of different states; a local one the nine it can make.
func TestTransitionsOfASharedBreaker(t *testing.T) {
	f := setup(t, otelmetrics.Options{})
	_, err := f.m.Register("shared", manager.Config{Store: store.NewMemory(f.mock)})
	require.NoError(t, err)
	f.m.Sync()
	n := map[string]int{}
	for k := range f.collect(t) {
		if strings.HasPrefix(k, "fusebox.breaker.transitions{") {
			n[strings.SplitN(strings.TrimPrefix(k, "fusebox.breaker.transitions{breaker="), ",", 2)[0]]++
		}
	}
	assert.Equal(t, map[string]int{"payments": 9, "shared": 12}, n)
}

// A breaker in a dry run reports the calls it would have declined, from
// zero; the others report none.
func TestAdapterDryRun(t *testing.T) {
	f := setup(t, otelmetrics.Options{})
	ctx := context.Background()
	dry, err := f.m.Register("search", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, DryRun: true})
	require.NoError(t, err)
	got := f.collect(t)
	assert.Equal(t, int64(0), got["fusebox.breaker.would_decline_calls{breaker=search}"])
	_, ok := got["fusebox.breaker.would_decline_calls{breaker=payments}"]
	assert.False(t, ok, "a breaker not in a dry run reports no would-be declines")
	require.ErrorIs(t, dry.Do(ctx, fail), errDown) // trips it
	require.ErrorIs(t, dry.Do(ctx, fail), errDown) // let through
	require.NoError(t, dry.Do(ctx, succeed))       // let through
	f.m.Sync()
	require.Equal(t, breaker.Open, dry.State())
	got = f.collect(t)
	assert.Equal(t, int64(2), got["fusebox.breaker.would_decline_calls{breaker=search}"])
	assert.Equal(t, int64(1), got["fusebox.breaker.dry_run{breaker=search}"], "a dry run is marked in every state")
	assert.Equal(t, int64(0), got["fusebox.breaker.dry_run{breaker=payments}"])
}

// The open period's end is reported while the breaker is open, in Unix
// seconds, and is 0 again once the period is over.
func TestAdapterOpenUntil(t *testing.T) {
	f := setup(t, otelmetrics.Options{})
	ctx := context.Background()
	const series = "fusebox.breaker.open_until_timestamp_seconds{breaker=payments}"
	assert.Equal(t, int64(0), f.collect(t)[series], "closed")
	opened := f.mock.Now()
	require.ErrorIs(t, f.b.Do(ctx, fail), errDown)
	require.ErrorIs(t, f.b.Do(ctx, fail), errDown)
	f.m.Sync()
	require.Equal(t, breaker.Open, f.b.State())
	assert.Equal(t, opened.Add(10*time.Second).UnixMilli(), f.collect(t)[series], "open 10s (in thousandths of a second)")
	f.mock.Add(10 * time.Second)
	f.m.Sync()
	require.Equal(t, breaker.HalfOpen, f.b.State())
	assert.Equal(t, int64(0), f.collect(t)[series], "half-open")
}

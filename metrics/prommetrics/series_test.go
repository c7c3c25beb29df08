package prommetrics_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/metrics/prommetrics"
	"github.com/fusebox-go/fusebox/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// richManager has a breaker of every kind the collector exports
// differently: a windowed one that times its calls, a shared one, one in
// a dry run, and a plain one.
func richManager(t *testing.T) (*manager.Manager, *prommetrics.Collector, *prometheus.Registry) {
	t.Helper()
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	t.Cleanup(m.Stop)
	c, err := prommetrics.New(m, prommetrics.Options{})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))

	rated, err := m.Register("rated", manager.Config{
		Strategy:  breaker.FailureRate{Rate: 0.9, Window: 10, MinCalls: 10},
		TimeCalls: true,
	})
	require.NoError(t, err)
	ctx := context.Background()
	for i, d := range []time.Duration{2 * time.Millisecond, 40 * time.Millisecond, 3 * time.Second, 20 * time.Second} {
		p, err := rated.Acquire(ctx)
		require.NoError(t, err)
		mock.Add(d)
		if i%2 == 0 {
			p.Release(errDown)
		} else {
			p.Release(nil)
		}
	}
	_, err = m.Register("shared", manager.Config{Store: store.NewMemory(mock)})
	require.NoError(t, err)
	_, err = m.Register("dry", manager.Config{DryRun: true})
	require.NoError(t, err)
	_, err = m.Register("plain", manager.Config{})
	require.NoError(t, err)
	m.Sync()
	return m, c, reg
}

// The failure rate is the strategy's own window, the histogram holds the
// timed calls in seconds, and the store series exist for shared breakers
// only.
func TestCollectorRatesDurationsAndStore(t *testing.T) {
	_, _, reg := richManager(t)
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP fusebox_breaker_failure_rate Failures divided by calls in the window of the breaker's strategy; while not closed, of the window it opened on.
# TYPE fusebox_breaker_failure_rate gauge
fusebox_breaker_failure_rate{breaker="rated"} 0.5
# HELP fusebox_breaker_call_duration_seconds Durations of the calls released through the breaker.
# TYPE fusebox_breaker_call_duration_seconds histogram
fusebox_breaker_call_duration_seconds_bucket{breaker="rated",le="0.005"} 1
fusebox_breaker_call_duration_seconds_bucket{breaker="rated",le="0.01"} 1
fusebox_breaker_call_duration_seconds_bucket{breaker="rated",le="0.025"} 1
fusebox_breaker_call_duration_seconds_bucket{breaker="rated",le="0.05"} 2
fusebox_breaker_call_duration_seconds_bucket{breaker="rated",le="0.1"} 2
fusebox_breaker_call_duration_seconds_bucket{breaker="rated",le="0.25"} 2
fusebox_breaker_call_duration_seconds_bucket{breaker="rated",le="0.5"} 2
fusebox_breaker_call_duration_seconds_bucket{breaker="rated",le="1"} 2
fusebox_breaker_call_duration_seconds_bucket{breaker="rated",le="2.5"} 2
fusebox_breaker_call_duration_seconds_bucket{breaker="rated",le="5"} 3
fusebox_breaker_call_duration_seconds_bucket{breaker="rated",le="10"} 3
fusebox_breaker_call_duration_seconds_bucket{breaker="rated",le="+Inf"} 4
fusebox_breaker_call_duration_seconds_sum{breaker="rated"} 23.042
fusebox_breaker_call_duration_seconds_count{breaker="rated"} 4
# HELP fusebox_breaker_store_down 1 while the shared breaker cannot reach its store and follows its fallback, 0 otherwise.
# TYPE fusebox_breaker_store_down gauge
fusebox_breaker_store_down{breaker="shared"} 0
# HELP fusebox_breaker_store_errors_total Calls of the shared breaker to its store that failed.
# TYPE fusebox_breaker_store_errors_total counter
fusebox_breaker_store_errors_total{breaker="shared"} 0
`), "fusebox_breaker_failure_rate", "fusebox_breaker_call_duration_seconds", "fusebox_breaker_store_down", "fusebox_breaker_store_errors_total"))
}

// Every series passes client_golang's lint and, where promtool is
// installed, `promtool check metrics`, as Prometheus itself would judge
// the scrape. Without promtool the second part skips, or fails when
// FUSEBOX_REQUIRE_PROMTOOL=1 (as in CI).
func TestCollectorLint(t *testing.T) {
	_, c, reg := richManager(t)
	problems, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	assert.Empty(t, problems)

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("FUSEBOX_REQUIRE_PROMTOOL") == "1" {
			t.Fatalf("FUSEBOX_REQUIRE_PROMTOOL=1: %v", err)
		}
		t.Skipf("skipping promtool check metrics: %v (apt-get install prometheus)", err)
	}
	families, err := reg.Gather()
	require.NoError(t, err)
	var text bytes.Buffer
	enc := expfmt.NewEncoder(&text, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		require.NoError(t, enc.Encode(f))
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = &text
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "promtool check metrics:\n%s", out)
	assert.Empty(t, strings.TrimSpace(string(out)), "promtool's findings")
}

// A scrape allocates at most 60 objects per breaker (plain client_golang
// vectors of the same series make about 100), counted with
// testing.AllocsPerRun: allocation counts do not depend on the machine.
func TestScrapeAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	const n = 1000
	fusebox, _ := scrapeFleet(t, n)
	allocs := testing.AllocsPerRun(5, func() {
		if _, err := fusebox.Gather(); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%.1f allocations per breaker", allocs/n)
	assert.LessOrEqual(t, allocs/n, 60.0, "allocations per breaker")
}

// A removed breaker's series go with it, and a breaker registered again
// under its name starts from zero.
func TestCollectorRemovedBreaker(t *testing.T) {
	_, m, b, _, reg := setup(t, prommetrics.Options{})
	require.NoError(t, b.ForceOpen())
	_, err := m.Register("other", manager.Config{})
	require.NoError(t, err)
	m.Sync()
	count := func(name string) int {
		families, err := reg.Gather()
		require.NoError(t, err)
		n := 0
		for _, f := range families {
			for _, mt := range f.GetMetric() {
				for _, l := range mt.GetLabel() {
					if l.GetName() == "breaker" && l.GetValue() == name {
						n++
					}
				}
			}
		}
		return n
	}
	require.Equal(t, 26, count("payments"), "every series of a breaker")
	require.True(t, m.Remove("payments"))
	m.Sync()
	assert.Zero(t, count("payments"), "after Remove")
	assert.Equal(t, 26, count("other"))

	_, err = m.Register("payments", manager.Config{})
	require.NoError(t, err)
	m.Sync()
	got, err := testutil.GatherAndCount(reg, "fusebox_breaker_transitions_total")
	require.NoError(t, err)
	assert.Equal(t, 18, got, "nine transitions for each of the two local breakers")
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP fusebox_breaker_forced_open 1 while the breaker is forced open by hand, 0 otherwise.
# TYPE fusebox_breaker_forced_open gauge
fusebox_breaker_forced_open{breaker="other"} 0
fusebox_breaker_forced_open{breaker="payments"} 0
`), "fusebox_breaker_forced_open"))
}

// A breaker kept in its process exports the nine transitions it can make,
// from zero; a shared one, which follows the fleet's state too, all
// twelve pairs of states.
func TestTransitionSeries(t *testing.T) {
	_, _, reg := richManager(t)
	families, err := reg.Gather()
	require.NoError(t, err)
	pairs := map[string][]string{}
	for _, f := range families {
		if f.GetName() != "fusebox_breaker_transitions_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range mt.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			pairs[l["breaker"]] = append(pairs[l["breaker"]], l["from"]+"->"+l["to"])
		}
	}
	local := []string{
		"closed->open", "half_open->closed", "half_open->open", "half_open->probing",
		"open->closed", "open->half_open", "probing->closed", "probing->half_open", "probing->open",
	}
	assert.ElementsMatch(t, local, pairs["plain"], "a local breaker")
	assert.ElementsMatch(t, local, pairs["rated"], "a local breaker")
	assert.ElementsMatch(t, append(local, "closed->half_open", "closed->probing", "open->probing"), pairs["shared"], "a shared breaker")
}

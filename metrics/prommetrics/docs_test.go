package prommetrics_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The ready-made panels and alerts in docs/ are checked against what the
// collector exports: every metric they name exists, and promtool accepts
// every query (as recording rules) and the alert rules, whose own unit
// tests pass.

// promtool returns the path of promtool. Without it the test skips, or
// fails when FUSEBOX_REQUIRE_PROMTOOL=1 (as in CI).
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("FUSEBOX_REQUIRE_PROMTOOL") == "1" {
			t.Fatalf("FUSEBOX_REQUIRE_PROMTOOL=1: %v", err)
		}
		t.Skipf("skipping: %v (apt-get install prometheus)", err)
	}
	return path
}

func runPromtool(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
	require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
}

// exported returns the names of every metric family the collector
// exports, with a histogram's _bucket, _sum and _count.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	_, _, reg := richManager(t)
	families, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
		if f.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+s] = true
			}
		}
	}
	return names
}

var metricName = regexp.MustCompile(`\bfusebox_[a-z_]+`)

func assertNamesExported(t *testing.T, what, text string, names map[string]bool) {
	t.Helper()
	for _, n := range metricName.FindAllString(text, -1) {
		assert.True(t, names[n], "%s uses %s, which the collector does not export", what, n)
	}
}

func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "grafana", "fusebox.json"))
	require.NoError(t, err)
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	require.NotEmpty(t, dash.UID)
	names := exported(t)
	// Grafana's variables, replaced as Grafana would for "All".
	vars := strings.NewReplacer("$instance", ".*", "$breaker", ".*", "$__rate_interval", "1m", "$__range", "1h")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: grafana\n    rules:\n")
	titles := map[string]bool{}
	for i, p := range dash.Panels {
		titles[p.Title] = true
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for j, q := range p.Targets {
			assertNamesExported(t, fmt.Sprintf("panel %q", p.Title), q.Expr, names)
			expr, err := json.Marshal(vars.Replace(q.Expr)) // a JSON string is a YAML string
			require.NoError(t, err)
			fmt.Fprintf(&rules, "      - record: panel_%d_%d\n        expr: %s\n", i, j, expr)
		}
	}
	for _, want := range []string{"State per breaker", "Open breakers", "Failure rate (strategy window)", "Declined calls by breaker", "Call latency", "Transitions"} {
		assert.True(t, titles[want], "a panel %q", want)
	}
	path := filepath.Join(t.TempDir(), "panels.yml")
	require.NoError(t, os.WriteFile(path, []byte(rules.String()), 0o644))
	runPromtool(t, "check", "rules", path)
}

func TestPrometheusAlerts(t *testing.T) {
	dir := filepath.Join("..", "..", "docs", "prometheus")
	raw, err := os.ReadFile(filepath.Join(dir, "alerts.yml"))
	require.NoError(t, err)
	assertNamesExported(t, "alerts.yml", string(raw), exported(t))
	var alerts []string
	for _, m := range regexp.MustCompile(`(?m)^\s*- alert: (\S+)`).FindAllStringSubmatch(string(raw), -1) {
		alerts = append(alerts, m[1])
	}
	sort.Strings(alerts)
	assert.Equal(t, []string{"FuseboxBreakerFlapping", "FuseboxBreakerOpen", "FuseboxCallsDeclined", "FuseboxDryRunWouldOpen", "FuseboxManagerHalted", "FuseboxStoreDown"}, alerts)
	runPromtool(t, "check", "rules", filepath.Join(dir, "alerts.yml"))
	runPromtool(t, "test", "rules", filepath.Join(dir, "alerts_test.yml"))
}

package otelmetrics_test

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/metrics/otelmetrics"
	"github.com/fusebox-go/fusebox/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Through the OpenTelemetry Prometheus exporter, every instrument gets the
// name package prommetrics gives the same metric, so that one PromQL
// query serves both.
func TestPrometheusExporterNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	require.NoError(t, err)
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer func() { require.NoError(t, provider.Shutdown(context.Background())) }()

	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()
	_, err = m.Register("rated", manager.Config{Strategy: breaker.FailureRate{Rate: 0.5, Window: 10, MinCalls: 10}})
	require.NoError(t, err)
	_, err = m.Register("shared", manager.Config{Store: store.NewMemory(mock)})
	require.NoError(t, err)
	r, err := otelmetrics.Register(m, otelmetrics.Options{MeterProvider: provider})
	require.NoError(t, err)
	defer func() { assert.NoError(t, r.Close()) }()

	families, err := reg.Gather()
	require.NoError(t, err)
	var names []string
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "fusebox_") {
			names = append(names, f.GetName())
		}
	}
	sort.Strings(names)
	// prommetrics' names, but for the call-duration histogram, which has
	// no asynchronous counterpart in OpenTelemetry.
	assert.Equal(t, []string{
		"fusebox_breaker_admitted_ratio",
		"fusebox_breaker_calls_total",
		"fusebox_breaker_declined_calls_total",
		"fusebox_breaker_dropped_events_total",
		"fusebox_breaker_dry_run",
		"fusebox_breaker_failure_rate",
		"fusebox_breaker_forced_open",
		"fusebox_breaker_missed_transitions_total",
		"fusebox_breaker_open_until_timestamp_seconds",
		"fusebox_breaker_released_calls_total",
		"fusebox_breaker_slow_calls_total",
		"fusebox_breaker_stale_releases_total",
		"fusebox_breaker_state",
		"fusebox_breaker_store_down",
		"fusebox_breaker_store_errors_total",
		"fusebox_breaker_transitions_total",
		"fusebox_manager_halted",
	}, names)
}

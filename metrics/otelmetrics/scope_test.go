package otelmetrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/metrics/otelmetrics"
	"github.com/fusebox-go/fusebox/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Without a provider, Register uses the global one; the meter is named
// after the package, with the module's version, and no instrument has the
// unit "1" (which the Prometheus exporter would turn into "_ratio"):
// gauges have none, counters a {annotation} the exporter drops.
func TestScopeAndUnits(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { require.NoError(t, provider.Shutdown(context.Background())) }()
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(provider)
	defer otel.SetMeterProvider(prev)

	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()
	_, err := m.Register("rated", manager.Config{Strategy: breaker.FailureRate{Rate: 0.5, Window: 10, MinCalls: 10}})
	require.NoError(t, err)
	_, err = m.Register("shared", manager.Config{Store: store.NewMemory(mock)})
	require.NoError(t, err)
	reg, err := otelmetrics.Register(m, otelmetrics.Options{})
	require.NoError(t, err)
	defer func() { assert.NoError(t, reg.Close()) }()

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	require.Len(t, rm.ScopeMetrics, 1)
	sm := rm.ScopeMetrics[0]
	assert.Equal(t, "github.com/fusebox-go/fusebox/metrics/otelmetrics", sm.Scope.Name)
	assert.Equal(t, otelmetrics.Version(), sm.Scope.Version)
	assert.NotEmpty(t, sm.Scope.Version)
	names := map[string]bool{}
	for _, mt := range sm.Metrics {
		names[mt.Name] = true
		assert.NotEqual(t, "1", mt.Unit, "%s", mt.Name)
		switch mt.Data.(type) {
		case metricdata.Sum[int64]:
			assert.True(t, strings.HasPrefix(mt.Unit, "{") && strings.HasSuffix(mt.Unit, "}"), "%s: unit %q", mt.Name, mt.Unit)
		default:
			assert.Empty(t, mt.Unit, "%s", mt.Name)
		}
	}
	for _, want := range []string{"fusebox.breaker.failure_rate", "fusebox.breaker.store_down", "fusebox.breaker.store_errors", "fusebox.manager.halted"} {
		assert.True(t, names[want], "%s is reported", want)
	}
}

package otelmetrics_test

import (
	"context"
	"fmt"
	"log"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/metrics/otelmetrics"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Register the adapter with a meter; any reader or exporter of the meter's
// provider then collects the breakers' metrics. Here a ManualReader
// collects once and the transition counts are printed.
func Example() {
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()
	b, err := m.Register("payments", manager.Config{})
	if err != nil {
		log.Fatal(err)
	}

	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	reg, err := otelmetrics.Register(m, otelmetrics.Options{MeterProvider: provider})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()

	_ = b.ForceOpen()
	_ = b.Reset()
	m.Sync()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != "fusebox.breaker.transitions" {
				continue
			}
			for _, p := range mt.Data.(metricdata.Sum[int64]).DataPoints {
				from, _ := p.Attributes.Value("from")
				to, _ := p.Attributes.Value("to")
				if p.Value > 0 { // every pair of states is reported, from zero
					fmt.Printf("%s -> %s: %d\n", from.AsString(), to.AsString(), p.Value)
				}
			}
		}
	}
	// Unordered output:
	// closed -> open: 1
	// open -> closed: 1
}

// In a program, the provider's reader is usually a periodic reader with an
// exporter, and the provider is set as the global one, which Register
// uses by default.
func Example_globalProvider() {
	m := manager.Start(manager.Options{})
	defer m.Stop()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer provider.Shutdown(context.Background())
	otel.SetMeterProvider(provider)

	reg, err := otelmetrics.Register(m, otelmetrics.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()
}

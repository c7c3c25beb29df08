package prommetrics_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/metrics/prommetrics"
	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkCall measures a call through a breaker with and without a
// collector attached: the collector adds nothing to the call.
func BenchmarkCall(b *testing.B) {
	for _, attached := range []bool{false, true} {
		b.Run(fmt.Sprintf("collector=%v", attached), func(b *testing.B) {
			m := manager.Start(manager.Options{Clock: clock.NewMock()})
			defer m.Stop()
			br, err := m.Register("payments", manager.Config{})
			if err != nil {
				b.Fatal(err)
			}
			if attached {
				c, err := prommetrics.New(m, prommetrics.Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				prometheus.NewRegistry().MustRegister(c)
			}
			ctx := context.Background()
			fn := func(context.Context) error { return nil }
			b.ReportAllocs()
			for b.Loop() {
				_ = br.Do(ctx, fn)
			}
		})
	}
}

// BenchmarkGather measures one scrape of a registry holding a collector of
// 100 breakers, each with a few transitions.
func BenchmarkGather(b *testing.B) {
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()
	c, err := prommetrics.New(m, prommetrics.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for i := range 100 {
		br, err := m.Register(fmt.Sprintf("breaker-%03d", i), manager.Config{})
		if err != nil {
			b.Fatal(err)
		}
		_ = br.ForceOpen()
		_ = br.Reset()
	}
	m.Sync()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

package prommetrics_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/breaker"
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

// scrapeFleet registers n breakers with a failure-rate window, each with a
// few calls and two transitions, and returns a registry holding a
// collector of them and one holding plain client_golang vectors set to the
// same series (24 a breaker), as a program would keep them by hand.
func scrapeFleet(tb testing.TB, n int) (fusebox, plain *prometheus.Registry) {
	tb.Helper()
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	tb.Cleanup(m.Stop)
	c, err := prommetrics.New(m, prommetrics.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	ctx := context.Background()
	for i := range n {
		br, err := m.Register(fmt.Sprintf("upstream-%05d.example", i), manager.Config{
			Strategy: breaker.FailureRate{Rate: 0.5, Window: 100, MinCalls: 20},
		})
		if err != nil {
			tb.Fatal(err)
		}
		_ = br.Do(ctx, func(context.Context) error { return nil })
		_ = br.ForceOpen()
		_ = br.Reset()
	}
	m.Sync()
	fusebox = prometheus.NewRegistry()
	fusebox.MustRegister(c)

	plain = prometheus.NewRegistry()
	gauge := func(name string, labels ...string) *prometheus.GaugeVec {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "plain", Subsystem: "breaker", Name: name, Help: name}, append([]string{"breaker"}, labels...))
		plain.MustRegister(v)
		return v
	}
	counter := func(name string, labels ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "plain", Subsystem: "breaker", Name: name, Help: name}, append([]string{"breaker"}, labels...))
		plain.MustRegister(v)
		return v
	}
	state, forced, rate := gauge("state", "state"), gauge("forced_open"), gauge("failure_rate")
	dry, until := gauge("dry_run"), gauge("open_until_timestamp_seconds")
	calls, released := counter("calls_total"), counter("released_calls_total", "outcome")
	declined, stale, slow := counter("declined_calls_total"), counter("stale_releases_total"), counter("slow_calls_total")
	dropped, missed, trans := counter("dropped_events_total"), counter("missed_transitions_total"), counter("transitions_total", "from", "to")
	states := []string{"closed", "open", "half_open", "probing"}
	for _, b := range m.Breakers() {
		st, name := b.Stats(), b.Name()
		for _, s := range states {
			state.WithLabelValues(name, s).Set(0)
		}
		for _, tr := range localTransitions {
			trans.WithLabelValues(name, tr[0], tr[1]).Add(0)
		}
		forced.WithLabelValues(name).Set(0)
		dry.WithLabelValues(name).Set(0)
		until.WithLabelValues(name).Set(0)
		rate.WithLabelValues(name).Set(0)
		calls.WithLabelValues(name).Add(float64(st.Calls))
		released.WithLabelValues(name, "success").Add(float64(st.Successes))
		released.WithLabelValues(name, "failure").Add(float64(st.Failures))
		released.WithLabelValues(name, "ignore").Add(float64(st.Ignored))
		declined.WithLabelValues(name).Add(0)
		stale.WithLabelValues(name).Add(0)
		slow.WithLabelValues(name).Add(0)
		dropped.WithLabelValues(name).Add(0)
		missed.WithLabelValues(name).Add(0)
	}
	return fusebox, plain
}

// localTransitions are the pairs of states a breaker kept in its process
// can make, as the collector exports them.
var localTransitions = [][2]string{
	{"closed", "open"}, {"open", "half_open"}, {"open", "closed"},
	{"half_open", "probing"}, {"half_open", "open"}, {"half_open", "closed"},
	{"probing", "closed"}, {"probing", "open"}, {"probing", "half_open"},
}

// BenchmarkScrape measures one scrape (Gather) of 10,000 breakers through
// the collector, side by side with plain client_golang vectors exposing
// the same series; allocs/breaker is allocs/op divided by the breakers.
func BenchmarkScrape(b *testing.B) {
	const n = 10000
	fusebox, plain := scrapeFleet(b, n)
	for _, c := range []struct {
		name string
		reg  *prometheus.Registry
	}{{"collector", fusebox}, {"plain", plain}} {
		b.Run(c.name, func(b *testing.B) {
			families, err := c.reg.Gather()
			if err != nil {
				b.Fatal(err)
			}
			series := 0
			for _, f := range families {
				series += len(f.GetMetric())
			}
			b.ReportAllocs()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			before := ms.Mallocs
			for b.Loop() {
				if _, err := c.reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(ms.Mallocs-before)/float64(b.N)/n, "allocs/breaker")
			b.ReportMetric(float64(series)/n, "series/breaker")
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

package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// BenchmarkHealthyCall compares a successful call through a breaker shared
// on Redis with one through a local breaker: the shared one must stay
// local on the hot path.
func BenchmarkHealthyCall(b *testing.B) {
	srv := redistest.Start(b)
	fn := func(context.Context) error { return nil }
	for _, shared := range []bool{false, true} {
		name := "local"
		if shared {
			name = "redis"
		}
		b.Run(name, func(b *testing.B) {
			var br *manager.Breaker
			if shared {
				br = startPeer(b, srv.Addr(), "svc", manager.Config{}, manager.Options{Resync: time.Hour}).b
			} else {
				m := manager.Start(manager.Options{Logger: quiet})
				b.Cleanup(m.Stop)
				var err error
				if br, err = m.Register("svc", manager.Config{}); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				_ = br.Do(ctx, fn)
			}
		})
	}
}

// BenchmarkOpenSeenByAnother measures how long an opening made by one
// manager takes to reach another, each with its own Redis client: from the
// moment the tripping Release returns until the other manager publishes its
// own transition to open (waited for on a subscription, so that the waiting
// does not take a processor from the managers). It reports the median and
// the 99th percentile over b.N openings.
func BenchmarkOpenSeenByAnother(b *testing.B) {
	srv := redistest.Start(b)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: time.Hour}}
	a := startPeer(b, srv.Addr(), "warmup", cfg, manager.Options{Resync: time.Hour})
	o := startPeer(b, srv.Addr(), "warmup", cfg, manager.Options{Resync: time.Hour})
	events, cancel := o.m.Subscribe(64)
	defer cancel()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		name := fmt.Sprintf("svc-%d", i)
		ca, co := cfg, cfg
		ca.Store, co.Store = a.st, o.st
		ba, err := a.m.Register(name, ca)
		if err != nil {
			b.Fatal(err)
		}
		bo, err := o.m.Register(name, co)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		p, _ := ba.Acquire(context.Background())
		p.Release(errBoom)
		start := time.Now()
		timeout := time.After(5 * time.Second)
	wait:
		for {
			select {
			case ev := <-events:
				if ev.Name == name && ev.Transition.To == breaker.Open {
					break wait
				}
			case <-timeout:
				b.Fatalf("opening %d not seen within 5s (state %v)", i, bo.State())
			}
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

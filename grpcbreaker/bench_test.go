package grpcbreaker_test

import (
	"context"
	"testing"

	"github.com/fusebox-go/fusebox/grpcbreaker"
	"github.com/fusebox-go/fusebox/manager"
)

// BenchmarkUnary is the Interceptor's cost per unary call through a closed
// breaker, with an invoker that does nothing: against BenchmarkInvoker, the
// call without the Interceptor. Retry hints (a trailer asked for on every
// call) are on by default and off in the second case.
func BenchmarkUnary(b *testing.B) {
	for _, c := range []struct {
		name string
		opts grpcbreaker.Options
	}{
		{"hints", grpcbreaker.Options{}},
		{"nohints", grpcbreaker.Options{IgnoreRetryInfo: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			m := manager.Start(manager.Options{})
			defer m.Stop()
			c.opts.Key = func(string, string) string { return "bench" }
			i, err := grpcbreaker.New(m, c.opts)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				_ = i.Unary(ctx, "/svc/M", nil, nil, nil, ok)
			}
		})
	}
}

func BenchmarkInvoker(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = ok(ctx, "/svc/M", nil, nil, nil)
	}
}

// BenchmarkDeclined is a call declined by an open breaker: no allocation.
func BenchmarkDeclined(b *testing.B) {
	m := manager.Start(manager.Options{})
	defer m.Stop()
	i, err := grpcbreaker.New(m, grpcbreaker.Options{Key: func(string, string) string { return "bench" }})
	if err != nil {
		b.Fatal(err)
	}
	br, err := m.Register("bench", manager.Config{})
	if err != nil {
		b.Fatal(err)
	}
	if err := br.ForceOpen(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = i.Unary(ctx, "/svc/M", nil, nil, nil, ok)
	}
}

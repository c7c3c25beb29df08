package machine_test

import (
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/machine"
)

// strategies are the three built-in strategies, configured so that the
// benchmarks' outcomes never trip them.
var strategies = []struct {
	name string
	s    breaker.Strategy
}{
	{"Consecutive", breaker.Consecutive{Failures: 1 << 30}},
	{"FailureRate", breaker.FailureRate{Rate: 1, Window: 100}},
	{"TimeWindow", breaker.TimeWindow{Rate: 1, Period: 10 * time.Second, MinCalls: 1 << 23}},
}

// BenchmarkMachineAcquireRecord is the closed-state path of one call
// through the pure machine: Acquire, then Record of a success. The time
// passed moves on by a microsecond per call, as a clock would, and carries
// a monotonic reading, as the real clock's does: TimeWindow measures its
// buckets with it.
func BenchmarkMachineAcquireRecord(b *testing.B) {
	for _, st := range strategies {
		b.Run(st.name, func(b *testing.B) {
			m, err := machine.NewMachine("bench", st.s, t0)
			if err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Microsecond)
				tk, _, _ := m.Acquire(now)
				m.Record(tk, classify.Success, now)
			}
		})
		b.Run(st.name+"/parallel", func(b *testing.B) {
			m, err := machine.NewMachine("bench", st.s, t0)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				now := time.Now()
				for pb.Next() {
					now = now.Add(time.Microsecond)
					tk, _, _ := m.Acquire(now)
					m.Record(tk, classify.Success, now)
				}
			})
		})
	}
}

// BenchmarkMachineAcquireDeclined is a call declined by an open breaker.
func BenchmarkMachineAcquireDeclined(b *testing.B) {
	m, err := machine.NewMachine("bench", breaker.Consecutive{Failures: 1}, t0)
	if err != nil {
		b.Fatal(err)
	}
	m.ForceOpen(t0)
	b.ReportAllocs()
	for b.Loop() {
		m.Acquire(t0)
	}
}

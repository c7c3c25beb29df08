package breaker_test

import (
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
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

// BenchmarkCounterRecord is one Record into each strategy's counter: all
// successes (a healthy service), and one failure in four.
func BenchmarkCounterRecord(b *testing.B) {
	outcomes := []struct {
		name string
		of   func(i int) classify.Outcome
	}{
		{"success", func(int) classify.Outcome { return classify.Success }},
		{"quarter_failures", func(i int) classify.Outcome {
			if i%4 == 0 {
				return classify.Failure
			}
			return classify.Success
		}},
	}
	for _, st := range strategies {
		for _, oc := range outcomes {
			b.Run(st.name+"/"+oc.name, func(b *testing.B) {
				c, err := st.s.NewCounter()
				if err != nil {
					b.Fatal(err)
				}
				now, i := time.Now(), 0
				b.ReportAllocs()
				for b.Loop() {
					now = now.Add(time.Microsecond)
					c.Record(oc.of(i), now)
					i++
				}
			})
			b.Run(st.name+"/"+oc.name+"/parallel", func(b *testing.B) {
				c, err := st.s.NewCounter()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					now, i := time.Now(), 0
					for pb.Next() {
						now = now.Add(time.Microsecond)
						c.Record(oc.of(i), now)
						i++
					}
				})
			})
		}
	}
}

package breaker_test

import (
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
)

// A TimeWindow counts and trips on a clock far past 2262 as it does today.
func TestTimeWindowFarFuture(t *testing.T) {
	for _, start := range []time.Time{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(5000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		c, err := breaker.TimeWindow{Rate: 0.5, Period: 10 * time.Second, Buckets: 10, MinCalls: 4}.NewCounter()
		if err != nil {
			t.Fatal(err)
		}
		now := start
		c.Record(classify.Success, now)
		now = now.Add(20 * time.Second)
		c.Record(classify.Success, now)
		c.Record(classify.Success, now)
		if c.Record(classify.Failure, now) {
			t.Fatalf("%v: tripped at 1 failure in 3 calls", start.Year())
		}
		if !c.Record(classify.Failure, now.Add(time.Second)) {
			t.Fatalf("%v: 2 failures in 4 calls within the period did not trip; the success 20s before has left the window", start.Year())
		}
	}
}

package breaker_test

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
)

// Bucket numbers buckets from the Unix epoch over the whole range of
// time.Time: checked against exact arithmetic, from before 1678 to long
// after 2262, where Unix nanoseconds no longer fit in an int64.
func TestBucketOverTheWholeTimeRange(t *testing.T) {
	instants := []time.Time{
		time.Unix(0, 0),
		time.Unix(0, 1),
		time.Unix(-1, 999_999_999),
		time.Date(1600, 3, 4, 5, 6, 7, 8, time.UTC),
		time.Date(2026, 12, 1, 11, 0, 0, 123, time.UTC),
		time.Date(2262, 4, 11, 23, 47, 16, 854_775_807, time.UTC),
		time.Date(2262, 4, 11, 23, 47, 16, 854_775_808, time.UTC),
		time.Date(3000, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1_000_000, 6, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1_000_000, 6, 1, 0, 0, 0, 0, time.UTC),
	}
	widths := []time.Duration{time.Millisecond, 7 * time.Millisecond, time.Second, 90 * time.Second, time.Hour, 1000 * time.Hour}
	for _, at := range instants {
		for _, w := range widths {
			s := breaker.TimeWindow{Rate: 0.5, Period: w * 10, Buckets: 10}
			exact := new(big.Int).Mul(big.NewInt(at.Unix()), big.NewInt(1e9))
			exact.Add(exact, big.NewInt(int64(at.Nanosecond())))
			q := new(big.Int)
			m := new(big.Int)
			q.DivMod(exact, big.NewInt(int64(w)), m) // Euclidean: floor for a positive divisor
			want := q.Int64()
			if !q.IsInt64() {
				want = math.MaxInt64
				if q.Sign() < 0 {
					want = math.MinInt64
				}
			}
			if got := s.Bucket(at); got != want {
				t.Errorf("Bucket(%v) with width %v = %d, want %d", at, w, got, want)
			}
		}
	}
}

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

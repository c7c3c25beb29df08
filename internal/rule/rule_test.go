package rule_test

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/fusebox-go/fusebox/internal/rule"
)

// Each strategy's rule is the one its counter, the stores and the manager
// decide with.
func TestTripRules(t *testing.T) {
	for _, c := range []struct {
		name     string
		failures int64
		want     bool
	}{
		{"below", 4, false},
		{"at", 5, true},
		{"above", 6, true},
	} {
		assert.Equal(t, c.want, rule.Consecutive(c.failures, 5), "Consecutive: %s: %d failures in a row, threshold 5", c.name, c.failures)
	}
	for _, c := range []struct {
		name                      string
		calls, failures, minCalls int64
		rate                      float64
		want                      bool
	}{
		{"below MinCalls", 3, 3, 4, 0.5, false},
		{"at MinCalls and the rate", 4, 2, 4, 0.5, true},
		{"below the rate", 4, 1, 4, 0.5, false},
		{"7 of 100 at 0.07 (divide, don't multiply)", 100, 7, 100, 0.07, true},
		{"6 of 100 at 0.07", 100, 6, 100, 0.07, false},
		{"F F F S S at MinCalls 5", 5, 3, 5, 0.5, true},
		{"no failure", 9, 0, 1, 0.5, false},
		{"no call", 0, 0, 0, 0.5, false},
		{"rate 1", 3, 3, 3, 1, true},
	} {
		assert.Equal(t, c.want, rule.Rate(c.calls, c.failures, c.minCalls, c.rate),
			"Rate: %s: %d failures of %d calls, MinCalls %d, rate %v", c.name, c.failures, c.calls, c.minCalls, c.rate)
	}
}

// A zero bucket count is DefaultBuckets, and bucket i of width w covers
// [i*w, (i+1)*w) of Unix time.
func TestBuckets(t *testing.T) {
	w := rule.Width(10*time.Second, 0)
	t0 := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	assert.Equal(t, rule.DefaultBuckets, rule.Buckets(0))
	assert.Equal(t, 7, rule.Buckets(7))
	assert.Equal(t, time.Second, w)
	for _, tt := range []struct {
		at   time.Time
		want int64
	}{
		{time.Unix(0, 0), 0},
		{time.Unix(0, 999_999_999), 0},
		{time.Unix(1, 0), 1},
		{time.Unix(0, -1), -1},
		{t0, t0.Unix()},
	} {
		assert.Equal(t, tt.want, rule.Bucket(tt.at, w), "Bucket(%v)", tt.at)
	}
}

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
			if got := rule.Bucket(at, w); got != want {
				t.Errorf("Bucket(%v) with width %v = %d, want %d", at, w, got, want)
			}
		}
	}
}

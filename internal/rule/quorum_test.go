package rule_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/fusebox-go/fusebox/internal/rule"
)

// The quorum takes out what the q-1 processes that reported the most
// failures counted.
func TestLargest(t *testing.T) {
	for _, c := range []struct {
		name   string
		shares []rule.Share
		q      int
		want   rule.Share
	}{
		{"no quorum", []rule.Share{{10, 10}}, 1, rule.Share{}},
		{"zero quorum", []rule.Share{{10, 10}}, 0, rule.Share{}},
		{"one bad replica, quorum 2", []rule.Share{{50, 1}, {30, 30}, {50, 0}}, 2, rule.Share{30, 30}},
		{"two bad replicas, quorum 2: one is taken out", []rule.Share{{30, 30}, {50, 1}, {20, 20}}, 2, rule.Share{30, 30}},
		{"quorum 3: the two largest", []rule.Share{{30, 30}, {50, 1}, {20, 20}}, 3, rule.Share{50, 50}},
		{"ties broken by calls", []rule.Share{{5, 3}, {9, 3}}, 2, rule.Share{9, 3}},
		{"fewer reporters than the quorum: all of them", []rule.Share{{4, 4}}, 3, rule.Share{4, 4}},
		{"no reporter", nil, 2, rule.Share{}},
	} {
		assert.Equal(t, c.want, rule.Largest(c.shares, c.q), "Largest: %s", c.name)
	}
}

func TestWithout(t *testing.T) {
	assert.Equal(t, rule.Share{Calls: 70, Failures: 1}, rule.Without(rule.Share{100, 31}, rule.Share{30, 30}))
	assert.Equal(t, rule.Share{}, rule.Without(rule.Share{10, 3}, rule.Share{20, 5}), "never below zero")
}

// A reporter's share of a window of 10 buckets, kept in two spans of 10.
func TestSlide(t *testing.T) {
	var s rule.Slide
	s = s.Add(20, 10, rule.Share{Calls: 10, Failures: 10}) // span 2, bucket 0
	s = s.Add(25, 10, rule.Share{Calls: 10, Failures: 5})  // span 2, bucket 5
	for _, c := range []struct {
		name string
		idx  int64
		want rule.Share
	}{
		{"within the span", 25, rule.Share{20, 15}},
		{"the span's last bucket", 29, rule.Share{20, 15}},
		{"the next span's first bucket: 9/10 of the span before", 30, rule.Share{18, 13}},
		{"the next span's middle", 35, rule.Share{8, 6}},
		{"the next span's last bucket: none of the span before", 39, rule.Share{0, 0}},
		{"two spans later", 40, rule.Share{}},
		{"a bucket before the span (a late read)", 19, rule.Share{}},
	} {
		assert.Equal(t, c.want, s.At(c.idx, 10), "At %d: %s", c.idx, c.name)
	}
	s = s.Add(31, 10, rule.Share{Calls: 4, Failures: 4}) // span 3: span 2 becomes Prev
	assert.Equal(t, rule.Slide{K: 3, Cur: rule.Share{4, 4}, Prev: rule.Share{20, 15}}, s)
	assert.Equal(t, rule.Share{4 + 16, 4 + 12}, s.At(31, 10), "8/10 of span 2 is still in the window")
	s = s.Add(55, 10, rule.Share{Calls: 1})
	assert.Equal(t, rule.Slide{K: 5, Cur: rule.Share{1, 0}}, s, "a span skipped: both counts start afresh")
	s = s.Add(49, 10, rule.Share{Calls: 2})
	assert.Equal(t, rule.Slide{K: 5, Cur: rule.Share{3, 0}}, s, "a late report counts in the span it reaches")
}

package manager

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestNamesakeRule walks the rule by which a manager finds another live
// process of its name from fixed instants: the store's answer to each of
// its announcements, in order, and whether it logs.
func TestNamesakeRule(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	const ttl = 10 * time.Second
	type answer struct {
		prev   string
		at     time.Duration
		report bool
	}
	for _, tc := range []struct {
		name    string
		answers []answer
	}{
		{"alone from the start", []answer{{"", 0, false}, {"me", time.Second, false}, {"me", 2 * time.Second, false}}},
		{"restarted: the first answer is its last life", []answer{{"old", 0, false}, {"me", time.Second, false}}},
		{"a namesake from the start", []answer{{"", 0, false}, {"twin", time.Second, true}, {"twin", 2 * time.Second, false}, {"twin", 3 * time.Second, false}}},
		{"a namesake with a longer resync", []answer{{"", 0, false}, {"twin", time.Second, true}, {"me", 2 * time.Second, false}, {"twin", 6 * time.Second, false}, {"me", 7 * time.Second, false}}},
		{"a namesake heard again after the store forgot it", []answer{{"", 0, false}, {"twin", time.Second, true}, {"me", 2 * time.Second, false}, {"twin", 13 * time.Second, true}}},
		{"a second namesake", []answer{{"", 0, false}, {"twin", time.Second, true}, {"third", 2 * time.Second, true}}},
		{"the store lost its data", []answer{{"", 0, false}, {"me", time.Second, false}, {"", 2 * time.Second, false}, {"me", 3 * time.Second, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n namesake
			for i, a := range tc.answers {
				var report bool
				n, report = n.heard("me", a.prev, t0.Add(a.at), ttl)
				assert.Equal(t, a.report, report, "answer %d (%q at %v)", i, a.prev, a.at)
			}
		})
	}
}

// TestDefaultNameNumbers: the first live manager of a process takes the
// host name, a second live one the host name and "-2", and a manager
// started once one stopped takes the number it gave back.
func TestDefaultNameNumbers(t *testing.T) {
	a, na := defaultProcessName()
	b, nb := defaultProcessName()
	assert.NotEqual(t, a, b)
	assert.True(t, strings.HasSuffix(b, "-"+strconv.Itoa(nb)), "the second live manager: %q", b)
	freeNumber(na)
	c, nc := defaultProcessName()
	assert.Equal(t, a, c, "the number the first gave back")
	assert.Equal(t, na, nc)
	freeNumber(nb)
	freeNumber(nc)
}

package reasontext_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/fusebox-go/fusebox/internal/reasontext"
	"github.com/fusebox-go/fusebox/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLine(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int
		want  string
	}{
		{"connection refused", 200, "connection refused"},
		{"line one\nline two\ttab", 200, "line one line two tab"},
		{"bad \xff byte", 200, "bad   byte"},
		{"abcdefghij", 8, "abcde..."},
		{"ééééé", 8, "éé..."}, // 10 bytes: cut at a character boundary
		{"abcdef", 2, "ab"},
		{"abcdef", 0, ""},
		{strings.Repeat("x", 500), reasontext.Max, strings.Repeat("x", reasontext.Max-3) + "..."},
	} {
		got := reasontext.Line(tc.in, tc.limit)
		assert.Equal(t, tc.want, got, "Line(%q, %d)", tc.in, tc.limit)
		assert.LessOrEqual(t, len(got), max(tc.limit, 0), "Line(%q, %d)", tc.in, tc.limit)
	}
}

func TestReasonString(t *testing.T) {
	r := store.Reason{By: "web-7", Why: "dial tcp: connection refused"}
	assert.Equal(t, "opened by web-7: dial tcp: connection refused", r.String())
	assert.Equal(t, "opened by web-7", store.Reason{By: "web-7"}.String())
	assert.Empty(t, store.Reason{}.String())
}

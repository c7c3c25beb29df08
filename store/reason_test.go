package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/fusebox-go/fusebox/store"
)

func TestOneLine(t *testing.T) {
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
	} {
		got := store.OneLine(tc.in, tc.limit)
		assert.Equal(t, tc.want, got, "OneLine(%q, %d)", tc.in, tc.limit)
		assert.LessOrEqual(t, len(got), max(tc.limit, 0), "OneLine(%q, %d)", tc.in, tc.limit)
	}
}

func TestReason(t *testing.T) {
	r := store.ReasonOf("web-7", errors.New("dial tcp:\nconnection refused"))
	assert.Equal(t, store.Reason{By: "web-7", Why: "dial tcp: connection refused"}, r)
	assert.Equal(t, "opened by web-7: dial tcp: connection refused", r.String())
	assert.Equal(t, "opened by web-7", store.ReasonOf("web-7", nil).String())
	assert.Empty(t, store.Reason{}.String())
	long := store.ReasonOf("web-7", errors.New(strings.Repeat("x", 500)))
	assert.Len(t, long.Why, store.MaxWhy)
}

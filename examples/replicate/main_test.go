package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain checks that the program leaves no goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs the program as a user would and checks that what it prints
// follows the scenario.
func TestRun(t *testing.T) {
	var out strings.Builder
	require.NoError(t, run(&out), "the replica must end up equal to the primary")
	text := out.String()
	t.Log("\n" + text)

	assert.Contains(t, text, "put a=1   replicated")
	for _, k := range []string{"b", "c", "d"} {
		assert.Contains(t, text, "put "+k+"=2   not replicated after", k)
	}
	assert.Equal(t, 3, strings.Count(text, "context deadline exceeded"), "three timeouts")
	for _, k := range []string{"e", "f"} {
		assert.Contains(t, text, "put "+k+"=2   declined by the breaker at once", k)
	}
	assert.Contains(t, text, "pending in the primary's file: 5 keys")
	for _, tr := range []string{"closed->open", "open->half_open", "half_open->probing", "probing->closed"} {
		assert.Contains(t, text, "breaker   "+tr, tr)
	}
	assert.Less(t, strings.Index(text, "closed->open"), strings.Index(text, "put e=2"), "the breaker opens before e")
	assert.Contains(t, text, "caught up: 0 keys pending")
	assert.Contains(t, text, "put g=3   replicated")
	assert.Equal(t, 2, strings.Count(text, "replica: a=1 b=2 c=2 d=2 e=2 f=2 g=3\n"), "after catch-up and after the rebuild")
	assert.Contains(t, text, "the replica loses its data, and a restore from an old backup brings back z=9: it holds z=9, 0 keys pending")
	assert.Contains(t, text, "rebuilt in")
	assert.Less(t, strings.Index(text, "the replica loses its data"), strings.LastIndex(text, "the replica holds exactly what the primary holds"), "equal again after the rebuild")
}

package main

import (
	"strings"
	"testing"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain checks that the program leaves no goroutine behind: not the
// manager's, not the callers', not the HTTP server's or client's.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs the program as a user would (it takes about 6.5 seconds of
// real time) and checks that what it prints matches what happened.
func TestRun(t *testing.T) {
	var out strings.Builder
	res, err := run(&out)
	require.NoError(t, err)
	text := out.String()
	t.Log("\n" + text)

	st := res.stats
	assert.Contains(t, text, "closed -> open", "the failing service must trip the breaker")
	assert.Contains(t, text, "probing -> closed", "the recovered service must close the breaker")
	assert.Equal(t, breaker.Closed, st.State, "the run ends with the service working")
	assert.Positive(t, st.Declined, "an open breaker declines calls")
	assert.Positive(t, res.probes, "an open breaker probes")
	assert.Equal(t, res.probes, strings.Count(text, "half_open -> probing"), "every probe is on the timeline")

	// Every request the service received came through the breaker. A call
	// let through may time out before its request arrives, so the service
	// may count fewer, never more.
	reached := st.Successes + st.Failures + st.Ignored
	assert.LessOrEqual(t, res.requests, reached)
	assert.Positive(t, res.requests)
	assert.Equal(t, st.Calls, reached+st.Declined)
}

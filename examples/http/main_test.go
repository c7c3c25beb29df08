package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/fusebox-go/fusebox/breaker"
)

// TestMain checks that the program leaves no goroutine behind: not the
// manager's, not the event logger's, not the HTTP server's or client's.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs the program as a user would (about 3 seconds of real time)
// and checks that what it prints matches what happened.
func TestRun(t *testing.T) {
	var out strings.Builder
	res, err := run(&out)
	require.NoError(t, err)
	text := out.String()
	t.Log("\n" + text)

	assert.Contains(t, text, "from=closed to=open", "the failing upstream trips the breaker")
	assert.Contains(t, text, "from=probing to=closed", "the recovered upstream closes the breaker")
	assert.Equal(t, breaker.Closed, res.final)
	assert.Positive(t, res.declined, "an open breaker declines requests")
	assert.Positive(t, res.probes, "an open breaker probes")
	assert.Equal(t, res.requests, res.sent+res.declined)
	assert.Equal(t, int64(res.sent), res.hits, "a declined request never reaches the upstream")
	assert.Equal(t, res.declined, strings.Count(text, "declined, no connection made"))

	// The Retry-After of the response that opened the breaker, not the
	// policy's 250ms, sets each open period, counted from the transition.
	require.NotEmpty(t, res.opened)
	for i, d := range res.opened {
		assert.Equal(t, time.Second, d,
			"open period %d lasts the second Retry-After asks for, not the policy's %v", i, openFor)
	}
}

package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/fusebox-go/fusebox/breaker"
)

// TestMain checks that the program leaves no goroutine behind: not the
// manager's, not the event logger's, not the gRPC server's or client's.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs the program as a user would (about 3 seconds of real time)
// and checks that what it prints matches what happened.
func TestRun(t *testing.T) {
	var out strings.Builder
	res, err := run(&out)
	require.NoError(t, err)
	text := out.String()
	t.Log("\n" + text)

	assert.Contains(t, text, "from=closed to=open", "the failing server trips the breaker")
	assert.Contains(t, text, "from=probing to=closed", "the recovered server closes the breaker")
	assert.Equal(t, breaker.Closed, res.final)
	assert.Positive(t, res.declined, "an open breaker declines calls")
	assert.Positive(t, res.probes, "an open breaker probes")
	assert.Equal(t, res.calls, res.sent+res.declined)
	assert.Equal(t, int64(res.sent), res.hits, "a declined call never reaches the server")
	assert.Equal(t, res.declined, strings.Count(text, "Unavailable, declined without a request"))

	// The server's RetryInfo, not the policy's 250ms, sets the open period.
	require.NotEmpty(t, res.opened)
	for _, d := range res.opened {
		assert.Equal(t, retryIn, d, "open period")
	}
}

package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/dashboard"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain checks that the program leaves no goroutine behind: not the
// manager's, the callers', the dashboard's or the HTTP servers'.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs the program for 3 seconds with a 1-second cycle, reads the
// dashboard while it runs, and checks that it exits on its own.
func TestRun(t *testing.T) {
	var out strings.Builder
	var page string
	var status dashboard.Status
	cfg := config{duration: 3 * time.Second, period: time.Second, addr: "127.0.0.1:0", actions: true}
	start := time.Now()
	err := run(context.Background(), cfg, &out, func(url string) {
		assert.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), url)
		page = get(t, url)
		require.NoError(t, json.Unmarshal([]byte(get(t, url+"api/status")), &status))
	})
	require.NoError(t, err)
	elapsed := time.Since(start)
	text := out.String()
	t.Log("\n" + text)

	assert.Less(t, elapsed, 10*time.Second, "the run ends after -duration")
	assert.GreaterOrEqual(t, elapsed, 3*time.Second)
	assert.Contains(t, text, "dashboard: http://127.0.0.1:")
	assert.Contains(t, page, `<meta name="fusebox-token"`, "-actions serves the buttons")
	require.Len(t, status.Breakers, 2)
	assert.Equal(t, "inventory", status.Breakers[0].Name)
	assert.Equal(t, "catalog", status.Breakers[1].Name)
	assert.True(t, status.Actions)
	assert.Contains(t, text, "inventory  closed->open", "the failing service trips the breaker")
	assert.Contains(t, text, "inventory  probing->closed", "the recovered service closes it")
	assert.Regexp(t, `catalog\s+closed\s+calls\s+\d+`, text)
}

// TestStopsOnCancel: Ctrl-C (a canceled context) ends the run at once.
func TestStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	err := run(ctx, config{duration: time.Hour, period: time.Second, addr: "127.0.0.1:0"}, io.Discard, func(string) { cancel() })
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestRejectsBadFlags(t *testing.T) {
	err := run(context.Background(), config{duration: 0, period: time.Second}, io.Discard, nil)
	assert.ErrorContains(t, err, "-duration")
	err = run(context.Background(), config{duration: time.Second, period: time.Millisecond}, io.Discard, nil)
	assert.ErrorContains(t, err, "-period")
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, url)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

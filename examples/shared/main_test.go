package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/fusebox-go/fusebox/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// check runs the program and checks what it prints against the scenario.
func check(t *testing.T, redisURL string, startRedis bool, backend string) {
	var out strings.Builder
	require.NoError(t, run(&out, redisURL, startRedis))
	text := out.String()
	t.Log("\n" + text)
	assert.Contains(t, text, backend)

	m := regexp.MustCompile(`the service saw (\d+) failing calls in all`).FindStringSubmatch(text)
	require.NotNil(t, m, "the summary of failing calls")
	n, _ := strconv.Atoi(m[1])
	assert.GreaterOrEqual(t, n, 5, "five failures open the breaker")
	assert.LessOrEqual(t, n, 5+3, "at most one call per replica may land after the fifth")
	assert.Equal(t, 1, strings.Count(text, "made the trial call"), "one trial call for the fleet")
	assert.Contains(t, text, "trial calls while the trial was in flight: 0")
	assert.Equal(t, 3, strings.Count(text, ": closed"), "every replica closes")
}

func TestRunInMemory(t *testing.T) {
	check(t, "", false, "the in-memory store")
}

func TestRunWithRedis(t *testing.T) {
	redistest.Binary(t) // skips without redis-server, fails under FUSEBOX_REQUIRE_REDIS=1
	check(t, "", true, "a redis-server started on")
}

package main

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A server at the -redis address that answers, but not as Redis does (an
// HTTP server, say: a wrong port), is reported as that, not as a Redis
// that cannot be reached.
func TestNotRedis(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.NotFoundHandler()}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		assert.ErrorIs(t, <-served, http.ErrServerClosed)
	})
	addr := l.Addr().String()

	for _, command := range [][]string{{"list"}, {"show", "payments"}, {"force-open", "payments"}, {"watch"}} {
		t.Run(command[0], func(t *testing.T) {
			r := fusebox(append([]string{"-redis", addr, "-timeout", "2s"}, command...)...)
			assert.Equal(t, 1, r.code, "exit status")
			assert.Contains(t, r.stderr, "fusebox: the server at "+addr+" is not a Redis server: ")
			assert.NotContains(t, r.stderr, "unreachable")
			assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line on stderr: %s", r.stderr)
			assert.Empty(t, r.stdout)
		})
	}
}

package redisstore_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

// closedPort returns a loopback address nobody listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// A client pointed at a port nobody listens on keeps dialling until the
// call's deadline: the store's error says why it could not connect, as
// well as that the deadline ran out, and so does the manager's log.
func TestStoreErrorSaysWhyItCannotConnect(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: closedPort(t), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	st := redisstore.New(client, redisstore.Options{})

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := st.Status(ctx, []string{"svc"})
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "%v", err)
	assert.Contains(t, err.Error(), "connection refused")

	var log syncBuffer
	m := manager.Start(manager.Options{Logger: slog.New(slog.NewTextHandler(&log, nil)), StoreTimeout: 300 * time.Millisecond})
	t.Cleanup(m.Stop)
	b, err := m.Register("svc", manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Store: st})
	require.NoError(t, err)
	m.Sync()
	s := b.Stats()
	assert.True(t, s.StoreDown, "on its fallback")
	assert.Positive(t, s.StoreErrors, "store errors")
	var lines []string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			lines = append(lines, l)
		}
	}
	require.NotEmpty(t, lines, "the manager logged the failures")
	// The store's loss is logged once, with the cause of the first store
	// call that failed: the registration's status read, or the watch when
	// it dials first (a busy machine runs either first).
	read := false
	for _, l := range lines {
		read = read || strings.Contains(l, "status read") || strings.Contains(l, "watching the store")
		assert.Contains(t, l, "connection refused", "a failure's log line")
	}
	assert.True(t, read, "the failed status read, or the failed watch, was logged: %q", lines)
}

package grpcbreaker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/fusebox-go/fusebox/grpcbreaker"
)

// ok is an invoker that answers every call at once.
func ok(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }

// The Interceptor keeps at most MaxBreakers breakers, however many keys its
// calls name: the least recently used go first.
func TestBreakersAreCapped(t *testing.T) {
	m, _ := newManager(t)
	i := newInterceptor(t, m, grpcbreaker.Options{
		Key:         func(_, method string) string { return method },
		MaxBreakers: 64,
	})
	for n := range 10_000 {
		require.NoError(t, i.Unary(context.Background(), fmt.Sprintf("/svc/M%d", n), nil, nil, nil, ok))
	}
	m.Sync()
	assert.LessOrEqual(t, len(m.Breakers()), 64, "breakers kept")
	_, kept := m.Breaker("/svc/M9999")
	assert.True(t, kept, "the most recent key's breaker is kept")
	_, kept = m.Breaker("/svc/M0")
	assert.False(t, kept, "the first key's breaker went")
}

// A breaker no call went through for IdleTimeout is removed by a later
// call; one in use stays.
func TestIdleBreakersAreRemoved(t *testing.T) {
	m, mock := newManager(t)
	i := newInterceptor(t, m, grpcbreaker.Options{
		Key:         func(_, method string) string { return method },
		IdleTimeout: time.Minute,
	})
	call := func(method string) { require.NoError(t, i.Unary(context.Background(), method, nil, nil, nil, ok)) }
	call("/svc/Idle")
	call("/svc/Busy")
	for range 4 {
		mock.Add(30 * time.Second)
		call("/svc/Busy")
	}
	m.Sync()
	_, idle := m.Breaker("/svc/Idle")
	assert.False(t, idle, "the idle breaker was removed")
	_, busy := m.Breaker("/svc/Busy")
	assert.True(t, busy, "the busy breaker stays")

	// A removed key gets a fresh breaker on its next call.
	call("/svc/Idle")
	_, idle = m.Breaker("/svc/Idle")
	assert.True(t, idle)
}

func TestUnbounded(t *testing.T) {
	m, mock := newManager(t)
	i := newInterceptor(t, m, grpcbreaker.Options{
		Key:         func(_, method string) string { return method },
		MaxBreakers: -1,
		IdleTimeout: -1,
	})
	for n := range 2000 {
		require.NoError(t, i.Unary(context.Background(), fmt.Sprintf("/svc/M%d", n), nil, nil, nil, ok))
	}
	mock.Add(24 * time.Hour)
	require.NoError(t, i.Unary(context.Background(), "/svc/last", nil, nil, nil, ok))
	m.Sync()
	assert.Len(t, m.Breakers(), 2001)
}

package manager_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
)

// The unsubscribe func closes the channel before it returns, and calling it
// again does nothing.
func TestUnsubscribeClosesAndIsIdempotent(t *testing.T) {
	m, _ := startMock(t)
	b := register(t, m, "b", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	events, unsubscribe := m.Subscribe(4)
	other, unsubscribeOther := m.Subscribe(4)
	defer unsubscribeOther()
	fail(t, b, 1)
	m.Sync()
	unsubscribe()
	requireClosed(t, events, "after unsubscribe")
	unsubscribe()
	unsubscribe()

	require.NoError(t, b.Reset())
	m.Sync()
	assert.Len(t, drain(other), 2, "the other subscription goes on")
}

func TestUnsubscribeConcurrently(t *testing.T) {
	m, _ := startMock(t)
	events, unsubscribe := m.Subscribe(1)
	done := make(chan struct{})
	for range 8 {
		go func() { unsubscribe(); done <- struct{}{} }()
	}
	for range 8 {
		<-done
	}
	requireClosed(t, events, "after concurrent unsubscribes")
}

package manager_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/store"
)

// The log lines of a store that cannot be reached, and of its coming back,
// name the breakers they concern (a long list is cut, and says how many
// more).
func TestStoreDownLogNamesTheBreakers(t *testing.T) {
	mock := clock.NewMock()
	cut := newHeldStore(store.NewMemory(mock))
	var logs logBuffer
	m := manager.Start(manager.Options{Clock: mock, Logger: logs.logger(), StoreTimeout: time.Hour, Resync: time.Second})
	t.Cleanup(m.Stop)
	for i := range 12 {
		register(t, m, fmt.Sprintf("svc-%02d", i), manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Store: cut})
	}
	m.Sync()
	cut.cut.Store(true)
	advance(m, mock, time.Second)
	advance(m, mock, time.Second)
	down := logs.find(t, "fusebox: store unreachable; shared breakers fall back")
	require.NotEmpty(t, down)
	names, _ := down[0]["names"].(string)
	assert.Contains(t, names, "svc-00", "the line names the breakers")
	assert.Contains(t, names, "and 4 more", "a long list is cut: %q", names)
	assert.NotContains(t, names, "svc-11")

	cut.cut.Store(false)
	for range 3 {
		advance(m, mock, time.Second)
	}
	back := logs.find(t, "fusebox: store reachable again; shared breakers follow it")
	require.NotEmpty(t, back)
	names, _ = back[0]["names"].(string)
	assert.Contains(t, names, "svc-00")
}

package manager_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/fusebox-go/fusebox/manager"
)

// A Manager not made by Start refuses every method at once, saying to use
// Start: Register with an error, the others by panicking with it. None
// waits for a loop that is not there, and none fails later blaming the
// Strategy.
func TestZeroManagerRefusesEveryMethod(t *testing.T) {
	calls := []struct {
		method string
		call   func(m *manager.Manager)
	}{
		{"Register", func(m *manager.Manager) {
			_, err := m.Register("payments", manager.Config{})
			if assert.Error(t, err) {
				assert.Contains(t, err.Error(), `"payments"`, "the error names the breaker")
				assert.Contains(t, err.Error(), "manager.Start")
			}
			panic(err) // as the others do, for the check below
		}},
		{"Breaker", func(m *manager.Manager) { m.Breaker("payments") }},
		{"Breakers", func(m *manager.Manager) { m.Breakers() }},
		{"Subscribe", func(m *manager.Manager) { m.Subscribe(1) }},
		{"Remove", func(m *manager.Manager) { m.Remove("payments") }},
		{"Sync", func(m *manager.Manager) { m.Sync() }},
		{"Stop", func(m *manager.Manager) { m.Stop() }},
		{"Done", func(m *manager.Manager) { m.Done() }},
		{"Clock", func(m *manager.Manager) { m.Clock() }},
	}
	for _, c := range calls {
		for what, m := range map[string]*manager.Manager{"zero": new(manager.Manager), "nil": nil} {
			t.Run(fmt.Sprintf("%s/%s", c.method, what), func(t *testing.T) {
				got := make(chan any, 1)
				go func() {
					defer func() { got <- recover() }()
					c.call(m)
				}()
				select {
				case v := <-got:
					err, _ := v.(error)
					if assert.Error(t, err, "%s of a Manager not made by Start: panic %v", c.method, v) {
						assert.Contains(t, err.Error(), "was not made by manager.Start: make one with manager.Start(manager.Options{})", "%s of a Manager not made by Start", c.method)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%s of a Manager not made by Start still waits after 5s", c.method)
				}
			})
		}
	}
}

package manager_test

import (
	"context"
	"sync"

	"github.com/fusebox-go/fusebox/store"
)

// gatedWatch is a manager's way to the shared memory store, through which
// the script holds, hands over late or loses the changes its watch hears
// of: a delayed or lost pub/sub message, made deterministic.
type gatedWatch struct {
	*store.Memory

	mu      sync.Mutex
	fn      func(store.Change)
	holding bool
	queue   []store.Change
}

// Watch implements store.Store, through the gate.
func (g *gatedWatch) Watch(ctx context.Context, ready func(), fn func(store.Change)) error {
	g.mu.Lock()
	g.fn = fn
	g.mu.Unlock()
	return g.Memory.Watch(ctx, ready, func(c store.Change) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.holding {
			g.queue = append(g.queue, c)
			return
		}
		fn(c)
	})
}

// hold makes the gate hold the changes from now on.
func (g *gatedWatch) hold() {
	g.mu.Lock()
	g.holding = true
	g.mu.Unlock()
}

// open hands over (deliver) or loses the held changes, and lets the
// next ones through.
func (g *gatedWatch) open(deliver bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if deliver {
		for _, c := range g.queue {
			g.fn(c)
		}
	}
	g.queue, g.holding = nil, false
}

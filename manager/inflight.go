package manager

import "sync"

// inflight counts the store calls the loop has started and whose results
// it has not received yet, so that Sync can wait for them: on the memory
// store they end at once, on another within Options.StoreTimeout.
type inflight struct {
	mu   sync.Mutex
	n    int
	zero *sync.Cond
}

func newInflight() *inflight {
	f := &inflight{}
	f.zero = sync.NewCond(&f.mu)
	return f
}

func (f *inflight) add() {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
}

func (f *inflight) done() {
	f.mu.Lock()
	if f.n--; f.n == 0 {
		f.zero.Broadcast()
	}
	f.mu.Unlock()
}

// wait returns once no call is in flight, and reports whether one was.
func (f *inflight) wait() (waited bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.n > 0 {
		waited = true
		f.zero.Wait()
	}
	return waited
}

// busy reports whether a call is in flight.
func (f *inflight) busy() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n > 0
}

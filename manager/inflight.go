package manager

import "sync"

// inflight counts the store calls the loop has started and whose results
// are not yet on their way to it, so that Sync can wait for them: on the
// memory store they end at once, on another within Options.StoreTimeout.
// A call is done once its result is in the loop's channel, which the next
// turn of the loop drains; started tells Sync whether a call began since
// it last found none in flight.
type inflight struct {
	mu      sync.Mutex
	n       int
	started uint64 // calls ever added
	zero    *sync.Cond
}

func newInflight() *inflight {
	f := &inflight{}
	f.zero = sync.NewCond(&f.mu)
	return f
}

func (f *inflight) add() {
	f.mu.Lock()
	f.n++
	f.started++
	f.mu.Unlock()
}

func (f *inflight) done() {
	f.mu.Lock()
	if f.n--; f.n == 0 {
		f.zero.Broadcast()
	}
	f.mu.Unlock()
}

// wait returns once no call is in flight, with how many calls had been
// started by then.
func (f *inflight) wait() (started uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.n > 0 {
		f.zero.Wait()
	}
	return f.started
}

// since reports whether a call was started after wait returned started.
func (f *inflight) since(started uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.started != started
}

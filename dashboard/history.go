package dashboard

import (
	"sync"

	"github.com/fusebox-go/fusebox/manager"
)

// history keeps the recent transitions of every breaker, from the manager's
// events (a manager.Watch), and tells the streams when some arrive.
type history struct {
	limit int
	w     *manager.Watch

	mu      sync.Mutex
	byName  map[string]*ring
	changed chan struct{} // closed and replaced when a batch of events arrives
}

// ring is one breaker's last transitions, oldest first from start.
type ring struct {
	recs   []TransitionRecord
	start  int
	missed uint64
}

func startHistory(m *manager.Manager, limit, buffer int) (*history, error) {
	h := &history{
		limit:   limit,
		byName:  make(map[string]*ring),
		changed: make(chan struct{}),
	}
	w, err := m.Watch(manager.WatchOptions{Buffer: buffer}, h.add)
	if err != nil {
		return nil, err
	}
	h.w = w
	return h, nil
}

// add records a batch of events and wakes the streams once for it.
func (h *history) add(batch []manager.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ev := range batch {
		if ev.Kind == manager.EventRemoved {
			delete(h.byName, ev.Name)
			continue
		}
		r := h.byName[ev.Name]
		if r == nil {
			r = &ring{}
			h.byName[ev.Name] = r
		}
		r.missed += ev.Missed
		if ev.Kind != manager.EventTransition {
			continue
		}
		rec := record(ev)
		if len(r.recs) < h.limit {
			r.recs = append(r.recs, rec)
			continue
		}
		r.recs[r.start] = rec
		r.start = (r.start + 1) % len(r.recs)
	}
	close(h.changed)
	h.changed = make(chan struct{})
}

// sync returns once every event the manager had sent to the history before
// the call has been recorded.
func (h *history) sync() { h.w.Sync() }

// read returns a copy of the breaker's transitions, oldest first, and how
// many it missed.
func (h *history) read(name string) ([]TransitionRecord, uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.byName[name]
	if r == nil {
		return []TransitionRecord{}, 0
	}
	out := make([]TransitionRecord, 0, len(r.recs))
	out = append(out, r.recs[r.start:]...)
	out = append(out, r.recs[:r.start]...)
	return out, r.missed
}

// wait returns a channel closed at the next batch of events.
func (h *history) wait() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

func (h *history) close() { h.w.Close() }

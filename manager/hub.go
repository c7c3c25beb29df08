package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fusebox-go/fusebox/internal/fleet"
	"github.com/fusebox-go/fusebox/internal/machine"
	"github.com/fusebox-go/fusebox/store"
)

// stores is what a manager keeps for its shared breakers: a hub per store,
// the store calls in flight off the loop, and the channel their results
// come back on. The loop reaches it through a few methods (storeResults,
// storesDue, storesNext, stopStores): nothing else of sharing shows in the
// loop, its timers or Sync.
type stores struct {
	timeout time.Duration // Options.StoreTimeout
	resync  time.Duration // Options.Resync
	ctx     context.Context
	cancel  context.CancelFunc // as the manager stops: ends every store call
	wg      sync.WaitGroup     // store goroutines
	calls   *inflight          // store calls whose results the loop has not received
	results chan storeResult

	// Owned by the loop.
	hubs     map[store.Store]*hub
	resyncAt time.Time // when the hubs resync next
}

// init makes s a new manager's stores, with the store options checked and
// their defaults filled in.
func (s *stores) init(m *Manager, opts Options) {
	s.timeout, s.resync = opts.StoreTimeout, opts.Resync
	s.calls = newInflight()
	s.results = make(chan storeResult, noteBuffer)
	s.hubs = make(map[store.Store]*hub)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if s.timeout < 0 || s.resync < 0 {
		m.logWarn("fusebox: Options.StoreTimeout or Options.Resync is negative; using the default",
			"store_timeout", s.timeout, "resync", s.resync)
	}
	if s.timeout <= 0 {
		s.timeout = defaultStoreTimeout
	}
	if s.resync <= 0 {
		s.resync = defaultResync
	}
	if s.timeout < minStoreTimeout || s.resync < minResync {
		m.logWarn("fusebox: Options.StoreTimeout or Options.Resync is below its minimum; using the minimum",
			"store_timeout", s.timeout, "resync", s.resync, "min_store_timeout", minStoreTimeout, "min_resync", minResync)
		s.timeout = max(s.timeout, minStoreTimeout)
		s.resync = max(s.resync, minResync)
	}
}

// storesDue starts what the hubs do when it is due: the next status read
// of their queues, and the resync. It runs on the loop.
func (m *Manager) storesDue() {
	now := m.clk.Now()
	for _, h := range m.stores.hubs {
		m.readNext(h, now)
	}
	m.resyncDue()
}

// storesNext returns when the hubs next need the loop (their resync, or a
// queued read waiting out its pause), if the manager has any.
func (m *Manager) storesNext() (time.Time, bool) {
	next := m.stores.resyncAt
	for _, h := range m.stores.hubs {
		if len(h.reads) > 0 && !h.reading && h.readAt.Before(next) {
			next = h.readAt
		}
	}
	return next, len(m.stores.hubs) > 0
}

// A hub connects a manager to one store: every shared breaker of the
// manager on that store goes through it. It has two goroutines: one runs the
// store's Watch, the other hands the changes Watch delivers to the loop. The
// periodic resync is a deadline of the loop, so that a mock clock moved on
// and then Sync see its result.
//
// What it reads of the store grows with what changes, not with its
// breakers: changes come by the watch; every breaker's status is read when
// the watch subscribes (and subscribes again, after a connection dropped,
// the one way to miss a change) and when a breaker registers; each Resync
// reads a few breakers only (sweepPerResync, in turn: a slow sweep, as a
// safety net, whose answer also says the store is alive, or, while it is
// unreachable, that it answers again: then every breaker is read). A
// change the hub had to drop (its loop was behind) makes it read every
// breaker too.
//
// Those reads of many breakers go through one queue (reads), read a chunk
// at a time with one read in flight, so that a fleet whose every process
// reads everything at once (at start-up, or as every watch subscribes
// again after a Redis failover) asks no more of the store than it answers
// within the store deadline: see nextChunk and readPause.
type hub struct {
	st      store.Store
	cancel  context.CancelFunc
	asked   atomic.Uint64 // status reads started, numbered from 1
	changes changeQueue
	names   atomic.Pointer[watchList] // what a store.NamesWatcher watches
	watched []string                  // owned by the loop: names' list, appended in place

	// Owned by the loop.
	list      []*shared // its breakers, in the order they registered
	byName    map[string]*shared
	windows   int        // how many of list have a window policy
	sweep     int        // where in list the sweep goes on
	link      fleet.Link // the store's link, as its watch and its reads say
	resyncing bool       // a resync's read is in flight
	reads     []*shared  // breakers whose status is to be read, in order; each has queued set
	reading   bool       // a read of the queue is in flight
	chunk     int        // how many breakers the next read of the queue takes (nextChunk)
	readFails int        // reads of the queue failed in a row
	readAt    time.Time  // the next read of the queue waits until then (readPause)
	namesake  namesake   // what the announcements of the manager's name on the store said
	resyncs   int        // resyncs started: every announceEvery-th announces the manager
}

// watchList is the list of breakers a store.NamesWatcher watches, and a
// channel closed when it changes. A list is never modified once
// published: the loop appends past its end, or publishes a new one.
type watchList struct {
	names   []string
	changed chan struct{}
}

// publishNames publishes names as the watched list, and tells the watch
// the last one changed.
func (h *hub) publishNames(names []string) {
	next := &watchList{names: names[:len(names):len(names)], changed: make(chan struct{})}
	if old := h.names.Swap(next); old != nil {
		close(old.changed)
	}
}

// watchNames is the names function of a store.NamesWatcher's watch.
func (h *hub) watchNames() ([]string, <-chan struct{}) {
	l := h.names.Load()
	return l.names, l.changed
}

// sweepPerResync is how many breakers of a hub a Resync reads while the
// store answers: at three Redis commands a breaker, under 50 commands a
// Resync however many breakers share the store, and every breaker read
// once every ceil(n/sweepPerResync) Resyncs.
const sweepPerResync = 16

// maxQueuedChanges bounds the changes a hub holds for a loop that is
// behind: past it, changes are dropped, and once the loop has caught up
// the hub reads every breaker's status, as after subscribing again.
const maxQueuedChanges = 4096

// changeQueue holds the changes Watch delivered, and the news that it
// subscribed, until the loop takes them. Each counts as a store call in
// flight (stores.calls) from the moment it is queued until it is in the
// loop's channel, so that Sync waits for it: on the memory store, which
// delivers a change before the call that made it returns, a Sync after
// that call sees the change applied. The first change dropped counts the
// read that stands for the dropped ones the same way.
type changeQueue struct {
	mu     sync.Mutex
	list   []storeResult
	lost   bool // a change was dropped since the last take
	closed bool
	wake   chan struct{} // one token: the list is not empty
}

// push queues msg, counted in f, unless the queue is closed or full. It
// never blocks: Watch calls it.
func (q *changeQueue) push(msg storeResult, f *inflight) {
	q.mu.Lock()
	if q.closed || len(q.list) >= maxQueuedChanges {
		if !q.closed && !q.lost {
			// The read of every breaker that stands for the changes
			// dropped is in flight from now, so that Sync waits for
			// it: counted until it is in the loop's channel.
			q.lost = true
			f.add()
		}
		q.mu.Unlock()
		return
	}
	f.add()
	q.list = append(q.list, msg)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take returns the queued changes, and empties the queue; lost says that
// changes were dropped since the last take.
func (q *changeQueue) take() (list []storeResult, lost bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	list, lost = q.list, q.lost
	q.list, q.lost = nil, false
	return list, lost
}

// close closes the queue and returns how many store calls in flight it
// still held: its changes, and the read for changes dropped.
func (q *changeQueue) close() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	n := len(q.list)
	if q.lost {
		n++ // the read for the changes dropped, which will not be made
	}
	q.list, q.lost = nil, false
	return n
}

// attach joins sh to the hub of its store, starting the hub if it is the
// first breaker on that store. It runs on the loop.
func (m *Manager) attach(sh *shared) {
	st := sh.st
	h := m.stores.hubs[st]
	if h == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h = &hub{st: st, cancel: cancel, byName: make(map[string]*shared), chunk: firstReadChunk}
		h.changes.wake = make(chan struct{}, 1)
		h.publishNames(nil)
		if len(m.stores.hubs) == 0 {
			m.stores.resyncAt = machine.After(m.clk.Now(), m.stores.resync)
		}
		m.stores.hubs[st] = h
		m.stores.wg.Add(2)
		// The first subscription counts as a store call in flight: a
		// Sync after Register returns once the watch is in place (or
		// its first attempt failed).
		m.stores.calls.add()
		go m.watch(ctx, h)
		go m.forward(ctx, h)
	}
	h.list = append(h.list, sh)
	h.byName[sh.b.Name()] = sh
	h.watched = append(h.watched, sh.b.Name())
	h.publishNames(h.watched)
	if sh.pending != nil {
		h.windows++
	}
	sh.hub = h
	if h.link.Down {
		a, notes := sh.step(fleet.Failed{Err: h.link.Err}, nil)
		sh.onLoop(a, notes, false)
		return
	}
	h.queue([]*shared{sh})
}

// detach takes the shared breaker sh off its hub, and stops the hub when
// sh was its last breaker.
func (m *Manager) detach(sh *shared) {
	h := sh.hub
	if i := slices.Index(h.list, sh); i >= 0 {
		h.list = slices.Delete(h.list, i, i+1)
		if sh.pending != nil {
			h.windows--
		}
	}
	if h.byName[sh.b.Name()] == sh {
		delete(h.byName, sh.b.Name())
		h.watched = slices.DeleteFunc(slices.Clone(h.watched), func(n string) bool { return n == sh.b.Name() })
		h.publishNames(h.watched)
	}
	if len(h.list) == 0 && m.stores.hubs[h.st] == h {
		h.cancel()
		delete(m.stores.hubs, h.st)
	}
}

// watch runs the store's Watch, queueing the changes it delivers for the
// loop, and resubscribes after a failure with a pause that grows while
// subscribing keeps failing, and starts small again once a subscription
// worked.
func (m *Manager) watch(ctx context.Context, h *hub) {
	defer m.stores.wg.Done()
	first := sync.OnceFunc(m.stores.calls.done)
	defer first()
	const firstPause = 50 * time.Millisecond
	pause := firstPause
	for {
		var subscribed atomic.Bool
		heard := func(c store.Change) {
			h.changes.push(changeMsg{h: h, change: c, at: m.clk.Now()}, m.stores.calls)
		}
		err := guardStore(h.st, func() error {
			if nw, ok := h.st.(store.NamesWatcher); ok {
				return nw.WatchNames(ctx, h.watchNames, func(names []string) {
					subscribed.Store(true)
					// These can no longer be missed: the loop reads
					// what changed before.
					h.changes.push(subscribedMsg{h: h, names: names}, m.stores.calls)
					first()
				}, heard)
			}
			return h.st.Watch(ctx, func() {
				subscribed.Store(true)
				// Subscribed: the loop reads what changed before, now
				// that nothing more can be missed.
				h.changes.push(subscribedMsg{h: h}, m.stores.calls)
				first()
			}, heard)
		})
		first()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("the watch ended")
		}
		if subscribed.Load() {
			pause = firstPause
		}
		m.sendStore(failedMsg{h: h, err: fmt.Errorf("watching the store: %w", err)})
		t := m.clk.Timer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// forward hands the hub's queued changes to the loop, in order, until the
// hub stops; changes still queued then are dropped.
func (m *Manager) forward(ctx context.Context, h *hub) {
	defer m.stores.wg.Done()
	for {
		select {
		case <-ctx.Done():
			for n := h.changes.close(); n > 0; n-- {
				m.stores.calls.done()
			}
			return
		case <-h.changes.wake:
		}
		list, lost := h.changes.take()
		for _, msg := range list {
			m.sendStore(msg)
			m.stores.calls.done()
		}
		if lost {
			// Changes were dropped: read what they would have said
			// (counted in flight since the first was dropped).
			m.sendStore(subscribedMsg{h: h})
			m.stores.calls.done()
		}
	}
}

// resyncDue starts the resync of every hub once its time has come: each
// reports the successes of window policies not reported yet, and reads the
// status of the next breakers of its sweep, or, while its store is
// unreachable, of every breaker. A hub whose last resync has not answered
// yet skips a turn. It runs on the loop.
func (m *Manager) resyncDue() {
	if len(m.stores.hubs) == 0 {
		return
	}
	now := m.clk.Now()
	if now.Before(m.stores.resyncAt) {
		return
	}
	m.stores.resyncAt = machine.After(now, m.stores.resync)
	for _, h := range m.stores.hubs {
		if h.resyncing || len(h.list) == 0 {
			continue
		}
		h.resyncing = true
		if h.resyncs%announceEvery == 0 {
			m.announce(h)
		}
		h.resyncs++
		list := h.nextSweep()
		var windows []*shared
		if h.windows > 0 {
			windows = make([]*shared, 0, h.windows)
			for _, sh := range h.list {
				if sh.pending != nil {
					windows = append(windows, sh)
				}
			}
		}
		m.goStore(h, nil, func(ctx context.Context, at time.Time) storeResult {
			// The reports come back with the read, and are stepped
			// on the loop before it.
			var reports []successReport
			for _, sh := range windows {
				if !sh.hints.Load().Down {
					if r, ok := sh.reportSuccesses(ctx, at); ok {
						reports = append(reports, r)
					}
				}
			}
			msg := m.statusOf(ctx, h, list)
			msg.resync, msg.reports = true, reports
			return msg
		})
	}
}

// nextSweep returns the breakers the hub's resync reads: the next
// sweepPerResync of them in turn. While the store is unreachable they tell
// when it answers again (the hub then reads every breaker): a store that
// answers slowly is not asked for everything at every Resync.
func (h *hub) nextSweep() []*shared {
	n := len(h.list)
	if n <= sweepPerResync {
		return slices.Clone(h.list)
	}
	list := make([]*shared, 0, sweepPerResync)
	for range sweepPerResync {
		h.sweep %= n
		list = append(list, h.list[h.sweep])
		h.sweep++
	}
	return list
}

// readAll queues every breaker of the hub for a status read, as its watch
// subscribes.
func (m *Manager) readAll(h *hub) { h.queue(h.list) }

// statusOf reads the shared state of the hub's breakers list; the
// statuses' deadlines count from their arrival (statusMsg.at).
func (m *Manager) statusOf(ctx context.Context, h *hub, list []*shared) statusMsg {
	names := make([]string, len(list))
	for i, sh := range list {
		names[i] = sh.b.Name()
	}
	seq := h.asked.Add(1)
	st, err := h.st.Status(ctx, names)
	return statusMsg{h: h, list: list, statuses: st, err: err, at: m.clk.Now(), seq: seq}
}

// stopStores ends every hub and waits for every store goroutine.
func (m *Manager) stopStores() {
	m.stores.cancel()
	for _, h := range m.stores.hubs {
		h.cancel()
	}
	m.stores.wg.Wait()
}

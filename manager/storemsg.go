package manager

import (
	"context"
	"fmt"
	"time"

	"github.com/fusebox-go/fusebox/internal/fleet"
	"github.com/fusebox-go/fusebox/store"
)

// storeResult is a result of the store coming back to the loop, which
// handles it. Each kind of result is a type of its own.
type storeResult interface {
	handle(m *Manager)
}

// changeMsg is a change the hub's watch delivered, heard at at.
type changeMsg struct {
	h      *hub
	change store.Change
	at     time.Time
}

func (msg changeMsg) handle(*Manager) {
	if sh := msg.h.byName[msg.change.Name]; sh != nil {
		sh.loopStep(fleet.Heard{Status: fleet.StatusOf(msg.change), At: msg.at})
	}
}

// subscribedMsg says the hub's watch subscribed, to the changes of every
// breaker or of those names lists: the loop reads their status, since
// changes made before may have been missed.
type subscribedMsg struct {
	h     *hub
	names []string // nil: every breaker
}

func (msg subscribedMsg) handle(m *Manager) {
	h := msg.h
	if m.stores.hubs[h.st] != h {
		return
	}
	if msg.names == nil {
		m.readAll(h)
		return
	}
	list := make([]*shared, 0, len(msg.names))
	for _, n := range msg.names {
		if sh := h.byName[n]; sh != nil {
			list = append(list, sh)
		}
	}
	h.queue(list)
}

// statusMsg is the answer to a status read of the hub: the statuses of
// list, in order, or the read's error.
type statusMsg struct {
	h        *hub
	list     []*shared
	statuses []store.Status
	err      error
	// at is when the read's answer arrived, on the manager's clock:
	// durations the store returned count from there, however late the
	// reply is handled. The store counted them down from some instant
	// before, so a deadline a mirror takes from them is never earlier
	// than the store's: a follower does not ask for a lease, nor the
	// opener for its own, before the store's period is over.
	at time.Time
	// seq numbers the read among the hub's (hub.asked): only one started
	// after a breaker fell back is news that its store answers.
	seq uint64
	// resync marks the answer to the periodic resync, queued that to a
	// read of the hub's queue, which took took.
	resync, queued bool
	took           time.Duration
	// reports are the resync's reports of windows' successes.
	reports []successReport
}

func (msg statusMsg) handle(m *Manager) {
	h := msg.h
	if msg.resync {
		h.resyncing = false
	}
	for _, r := range msg.reports {
		r.handle()
	}
	if msg.queued && !m.readAnswered(h, msg) {
		return
	}
	if msg.err != nil {
		m.storeDown(h, msg.err)
		return
	}
	var back bool
	if h.link, back = h.link.Answer(msg.seq); back {
		m.logInfo("fusebox: store reachable again; shared breakers follow it", "breakers", len(h.list), "names", h.breakerNames(), "store", fmt.Sprintf("%T", h.st))
		if len(msg.list) < len(h.list) {
			// The sweep's few breakers answered: read the others.
			m.readAll(h)
		}
	}
	for i, sh := range msg.list {
		if sh.b.removed {
			continue
		}
		if i < len(msg.statuses) && msg.statuses[i].Err != nil {
			// Its stored state is bad data: its problem alone, an
			// error of its own, as a failed call of its would be.
			sh.errors.Add(1)
			sh.loopStep(fleet.Failed{Err: msg.statuses[i].Err})
			continue
		}
		sh.loopStep(fleet.Answered{Seq: msg.seq})
		if i < len(msg.statuses) {
			sh.loopStep(fleet.Heard{Status: msg.statuses[i], At: msg.at, Seq: msg.seq})
		}
	}
}

// decidedMsg is the answer to a store call the loop made for breaker sh:
// an opening, a failed probe's verdict or a forcing.
type decidedMsg struct {
	sh *shared
	d  fleet.Decided
}

func (msg decidedMsg) handle(*Manager) {
	if msg.sh.b.removed {
		return
	}
	if msg.d.Err != nil {
		msg.sh.errors.Add(1)
	}
	msg.sh.loopStep(msg.d)
}

// heardMsg is a status a store call the loop made for breaker sh
// returned (a lease given back, fleet.GiveBackCall).
type heardMsg struct {
	sh *shared
	h  fleet.Heard
}

func (msg heardMsg) handle(*Manager) {
	if !msg.sh.b.removed {
		msg.sh.loopStep(msg.h)
	}
}

// failedMsg says that a store call failed: one of breaker sh's, or, for sh
// nil, the hub's watch.
type failedMsg struct {
	h   *hub
	sh  *shared
	err error
}

func (msg failedMsg) handle(m *Manager) {
	if msg.sh == nil {
		msg.h.resyncing = false
		m.storeDown(msg.h, msg.err)
		return
	}
	if !msg.sh.b.removed {
		msg.sh.errors.Add(1)
		msg.sh.loopStep(fleet.Failed{Err: msg.err})
	}
}

// storeResults is the channel the loop receives store results on.
func (m *Manager) storeResults() <-chan storeResult { return m.stores.results }

// drainStore handles the store's results already waiting, as drainNotes
// does the transitions: a Sync after a store call's result came sees it
// applied.
func (m *Manager) drainStore() {
	for i := len(m.stores.results); i > 0; i-- {
		(<-m.stores.results).handle(m)
	}
}

// goStore runs a store call off the loop, with the store deadline, and
// hands its result to the loop; at is when the call started, on the
// manager's clock. A store that panics fails the call: the hub's breakers,
// or sh's alone if sh is not nil, fall back.
func (m *Manager) goStore(h *hub, sh *shared, call func(ctx context.Context, at time.Time) storeResult) {
	m.stores.wg.Add(1)
	m.stores.calls.add()
	go func() {
		defer m.stores.wg.Done()
		// Done once the result is in the loop's channel (or the
		// manager stopped): the loop drains the channel before it
		// answers a later Sync.
		defer m.stores.calls.done()
		ctx, cancel := context.WithTimeout(context.Background(), m.stores.timeout)
		defer cancel()
		stop := context.AfterFunc(m.stores.ctx, cancel)
		defer stop()
		at := m.clk.Now()
		var msg storeResult
		if err := guardStore(h.st, func() error { msg = call(ctx, at); return nil }); err != nil {
			msg = failedMsg{h: h, sh: sh, err: err}
		}
		m.sendStore(msg)
	}()
}

// sendStore hands a result to the loop, unless the manager stops first.
func (m *Manager) sendStore(msg storeResult) {
	select {
	case m.stores.results <- msg:
	case <-m.stores.ctx.Done():
	}
}

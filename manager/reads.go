package manager

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/fusebox-go/fusebox/internal/fleet"
	"github.com/fusebox-go/fusebox/internal/machine"
)

// This file is a hub's queue of status reads: the breakers that registered,
// every breaker as the watch subscribes (again), those of a shard whose
// subscription is ready. They are read a chunk at a time, one read in flight
// per hub, the chunk sized from how fast the store answered the last read.
// A fleet of N processes that all read K breakers at once (at start-up, or
// as every watch subscribes again after a Redis failover) so asks the store
// for about N chunks at a time, not N*K statuses, and each chunk's read
// fits the store deadline.

// The sizes of a read of the queue, in breakers (three Redis commands each).
const (
	minReadChunk   = sweepPerResync // what a read shrinks to while the store is slow
	firstReadChunk = 64             // a new hub's first read
	maxReadChunk   = 1024           // what a read grows to while the store is fast
)

// The pause before the next read of the queue after a read failed: it
// doubles with each failure in a row, from firstReadPause to maxReadPause,
// and is drawn from its upper half so that processes that failed together
// do not retry together.
const (
	firstReadPause = 50 * time.Millisecond
	maxReadPause   = 5 * time.Second
)

// nextChunk returns how many breakers the next read of a hub's queue takes,
// after a read of n breakers, when the chunk was chunk, took took or failed,
// against the store deadline timeout. A read that failed or took over half
// the deadline halves the chunk; a full read that took under an eighth of
// it doubles the chunk; the chunk stays within [minReadChunk, maxReadChunk].
func nextChunk(chunk, n int, took, timeout time.Duration, failed bool) int {
	switch {
	case failed || took > timeout/2:
		chunk /= 2
	case n >= chunk && took < timeout/8:
		chunk *= 2
	}
	return min(max(chunk, minReadChunk), maxReadChunk)
}

// readPause returns the pause before the next read of a hub's queue after
// fails reads failed in a row, for r drawn from [0, 1).
func readPause(fails int, r float64) time.Duration {
	d := maxReadPause
	if fails < 16 {
		d = min(firstReadPause<<max(fails-1, 0), maxReadPause)
	}
	return d/2 + time.Duration(r*float64(d/2))
}

// queue adds the breakers of list that are not queued yet to the hub's
// reads.
func (h *hub) queue(list []*shared) {
	for _, sh := range list {
		if !sh.queued && !sh.b.removed {
			sh.queued = true
			h.reads = append(h.reads, sh)
		}
	}
}

// unqueue empties the hub's reads.
func (h *hub) unqueue() {
	for _, sh := range h.reads {
		sh.queued = false
	}
	h.reads = nil
}

// readNext starts the next read of the hub's queue, unless one is in
// flight or the pause after a failed read is not over. (While the store is
// unreachable, the queue holds only what news that it answers queued: a
// subscription, or the sweep's answer.) It runs on the loop.
func (m *Manager) readNext(h *hub, now time.Time) {
	if h.reading || len(h.reads) == 0 || now.Before(h.readAt) {
		return
	}
	// The next chunk of breakers still registered (a removed one stays
	// queued until here).
	list := make([]*shared, 0, min(h.chunk, len(h.reads)))
	i := 0
	for ; i < len(h.reads) && len(list) < h.chunk; i++ {
		sh := h.reads[i]
		sh.queued = false
		if !sh.b.removed {
			list = append(list, sh)
		}
	}
	if h.reads = h.reads[i:]; len(h.reads) == 0 {
		h.reads = nil
	}
	if len(list) == 0 {
		return
	}
	h.reading = true
	m.goStore(h, nil, func(ctx context.Context, _ time.Time) storeResult {
		start := time.Now()
		msg := m.statusOf(ctx, h, list)
		msg.queued, msg.took = true, time.Since(start)
		return msg
	})
}

// readAnswered takes the answer to a read of the hub's queue into account:
// the next chunk's size, and, if the read failed, its breakers' fallback.
// It reports whether the read succeeded. It runs on the loop.
func (m *Manager) readAnswered(h *hub, msg statusMsg) bool {
	h.reading = false
	h.chunk = nextChunk(h.chunk, len(msg.list), msg.took, m.stores.timeout, msg.err != nil)
	if msg.err == nil {
		h.readFails = 0
		return true
	}
	// A read that failed is about its breakers: they fall back until a
	// read of them answers, and wait in the queue for it. The store as a
	// whole is unreachable only once its watch or its sweep says so.
	h.readFails++
	h.readAt = machine.After(m.clk.Now(), readPause(h.readFails, rand.Float64()))
	if h.readFails == 1 {
		m.logWarn("fusebox: a status read of shared breakers failed; they fall back until one answers",
			"breakers", len(msg.list), "chunk", h.chunk, "error", msg.err)
	}
	for _, sh := range msg.list {
		if sh.b.removed {
			continue
		}
		sh.errors.Add(1)
		a, notes := sh.step(fleet.Failed{Err: msg.err}, nil)
		sh.onLoop(a, notes, false)
	}
	if !h.link.Down {
		h.queue(msg.list) // (else every breaker is read once the store answers)
	}
	return false
}

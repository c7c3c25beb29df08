package dashboard

import (
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/watch"
	"github.com/fusebox-go/fusebox/manager"
)

// The hub keeps what the page shows of every breaker, fed by the manager's
// events (an internal/watch.Watch) and by a scan of every breaker's stats each
// Refresh. Each change is encoded once, as a message of the stream that
// holds only the breakers that changed, and every event stream sends the
// same bytes; a stream that connects, or falls behind the messages kept,
// gets a full snapshot instead.

// ringSize is how many messages the hub keeps for streams that are behind.
const ringSize = 256

// flushGap is the shortest time between two messages caused by events:
// a burst of transitions makes one message.
const flushGap = 250 * time.Millisecond

// rateWindow is the span of the call and failure rates, and rateStep the
// spacing of the samples they are computed from.
const (
	rateWindow = time.Minute
	rateStep   = 5 * time.Second
	rateSlots  = int(rateWindow/rateStep) + 1
)

// message is one encoded stream message.
type message struct {
	seq  uint64
	data []byte // "event: delta\ndata: ...\n\n"
}

// sample is a breaker's counters at one instant, for its rates.
type sample struct {
	at                  time.Time
	calls, ok, failures uint64
}

// rates returns the calls per second and the share of failures among the
// calls with an outcome (successes and failures) between the oldest sample
// at most rateWindow before cur and cur. Zero without such a sample or
// calls.
func rates(samples []sample, cur sample) (perSecond, failureRate float64) {
	var base *sample
	for i := range samples {
		s := &samples[i]
		if s.at.IsZero() || cur.at.Sub(s.at) > rateWindow || !s.at.Before(cur.at) {
			continue
		}
		if base == nil || s.at.Before(base.at) {
			base = s
		}
	}
	if base == nil {
		return 0, 0
	}
	secs := cur.at.Sub(base.at).Seconds()
	perSecond = float64(cur.calls-base.calls) / secs
	if done := (cur.ok - base.ok) + (cur.failures - base.failures); done > 0 {
		failureRate = float64(cur.failures-base.failures) / float64(done)
	}
	return perSecond, failureRate
}

// wireTransition is a transition as the stream sends it.
type wireTransition struct {
	from, to breaker.State
	at       time.Time
	cause    breaker.Cause
	outcome  uint8
	err      string // an opening's Event.Err, on one bounded line; "" for none
}

// view is what the stream says of a breaker, compared between scans to
// send only what changed.
type view struct {
	state                                              breaker.State
	since, until                                       time.Time
	forced, shared, storeDown                          bool
	calls, ok, failures, ignored, declined, stale, drp uint64
	missed, slow                                       uint64
	perSecond, failurePermille                         int64 // rounded: calls per 100 s, failures per thousand
	processes                                          int64 // the processes the fleet's count comes from, under a quorum
	admitted                                           float64
	slowUntil                                          time.Time // the end of a slow start that runs
	dryRun                                             bool
	would                                              uint64 // calls let through that a dry run would have declined
	why                                                string // who opened the breaker and why (whyOf)
}

type entry struct {
	id   int
	name string
	b    *manager.Breaker

	recs   []TransitionRecord // ring, oldest at start
	wire   []wireTransition   // the same, for snapshots
	start  int
	missed uint64
	fresh  []wireTransition // since the last message

	last              view
	sent              bool // last has been sent
	samples           [rateSlots]sample
	slot              int
	callsPS, failRate float64
}

type hub struct {
	m       *manager.Manager
	title   string
	actions bool
	limit   int
	w       *watch.Watch

	mu      sync.Mutex
	byName  map[string]*entry
	order   []*entry // registration order
	nextID  int
	dirty   map[*entry]bool
	gone    []int
	added   []*entry
	seq     uint64
	ring    []message // the last messages, oldest first
	changed chan struct{}

	wake chan struct{}
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

func startHub(m *manager.Manager, title string, actions bool, limit, buffer int, refresh time.Duration) (*hub, error) {
	h := &hub{
		m: m, title: title, actions: actions, limit: limit,
		byName:  make(map[string]*entry),
		dirty:   make(map[*entry]bool),
		changed: make(chan struct{}),
		wake:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	w, err := watch.Start(m, buffer, h.add)
	if err != nil {
		return nil, err
	}
	h.w = w
	// The breakers there now are the baseline every snapshot starts from.
	now := m.Clock().Now()
	h.mu.Lock()
	h.scanLocked(now)
	for _, e := range h.order {
		e.last, e.sent = h.viewOf(e, now, true), true
	}
	h.added = h.added[:0]
	clear(h.dirty)
	h.mu.Unlock()
	go h.run(refresh)
	return h, nil
}

func (h *hub) run(refresh time.Duration) {
	defer close(h.done)
	tick := time.NewTicker(refresh)
	defer tick.Stop()
	for {
		select {
		case <-h.quit:
			return
		case <-tick.C:
			h.flush(true)
		case <-h.wake:
			h.flush(false)
			// Let a burst of events gather before the next message.
			t := time.NewTimer(flushGap)
			select {
			case <-h.quit:
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// add takes a batch of events from the watch.
func (h *hub) add(batch []manager.Event) {
	h.mu.Lock()
	for _, ev := range batch {
		e := h.byName[ev.Name]
		if ev.Kind == manager.EventRemoved {
			if e != nil {
				h.removeLocked(e)
			}
			continue
		}
		if e == nil {
			b, ok := h.m.Breaker(ev.Name)
			if !ok {
				continue
			}
			e = h.addLocked(b)
		}
		e.missed += ev.Missed
		h.dirty[e] = true
		if ev.Kind != manager.EventTransition {
			continue
		}
		wt := wireTransition{from: ev.Transition.From, to: ev.Transition.To, at: ev.At, cause: ev.Cause, outcome: uint8(ev.Outcome)}
		if ev.Err != nil {
			wt.err = errText(ev.Err)
		}
		e.fresh = append(e.fresh, wt)
		if len(e.fresh) > h.limit {
			e.fresh = e.fresh[len(e.fresh)-h.limit:]
		}
		rec := record(ev)
		if len(e.recs) < h.limit {
			e.recs = append(e.recs, rec)
			e.wire = append(e.wire, wt)
		} else {
			e.recs[e.start], e.wire[e.start] = rec, wt
			e.start = (e.start + 1) % len(e.recs)
		}
	}
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func (h *hub) addLocked(b *manager.Breaker) *entry {
	e := &entry{id: h.nextID, name: b.Name(), b: b}
	h.nextID++
	h.byName[e.name] = e
	h.order = append(h.order, e)
	h.added = append(h.added, e)
	h.dirty[e] = true
	return e
}

func (h *hub) removeLocked(e *entry) {
	delete(h.byName, e.name)
	delete(h.dirty, e)
	for i, o := range h.order {
		if o == e {
			h.order = append(h.order[:i], h.order[i+1:]...)
			break
		}
	}
	h.gone = append(h.gone, e.id)
}

// scanLocked takes in breakers registered or removed without an event the
// hub saw, and samples every breaker's counters for its rates.
func (h *hub) scanLocked(now time.Time) {
	bs := h.m.Breakers()
	seen := make(map[*manager.Breaker]bool, len(bs))
	for _, b := range bs {
		seen[b] = true
		if e := h.byName[b.Name()]; e == nil {
			h.addLocked(b)
		} else if e.b != b {
			// Removed and registered again while the hub was behind.
			h.removeLocked(e)
			h.addLocked(b)
		}
	}
	for _, e := range append([]*entry(nil), h.order...) {
		if !seen[e.b] {
			h.removeLocked(e)
		}
	}
}

// viewOf reads e's breaker now, and samples its counters when due.
func (h *hub) viewOf(e *entry, now time.Time, sampleRates bool) view {
	st := e.b.Stats()
	v := view{
		state: st.State, since: st.Since, until: st.Until, forced: st.Forced,
		shared: st.Shared, storeDown: st.StoreDown, processes: st.Processes,
		dryRun: st.DryRun, would: st.WouldDecline, why: whyOf(st),
		calls: st.Calls, ok: st.Successes, failures: st.Failures, ignored: st.Ignored,
		declined: st.Declined, stale: st.Stale, drp: st.DroppedEvents, missed: e.missed, slow: st.SlowCalls,
		admitted: st.Admitted, slowUntil: st.SlowStartUntil,
	}
	if sampleRates {
		cur := sample{at: now, calls: st.Calls, ok: st.Successes, failures: st.Failures}
		e.callsPS, e.failRate = rates(e.samples[:], cur)
		last := e.samples[(e.slot+rateSlots-1)%rateSlots]
		if last.at.IsZero() || now.Sub(last.at) >= rateStep {
			e.samples[e.slot] = cur
			e.slot = (e.slot + 1) % rateSlots
		}
	}
	v.perSecond = int64(e.callsPS*100 + 0.5)
	v.failurePermille = int64(e.failRate*1000 + 0.5)
	return v
}

// flush sends a message with every breaker that changed: those with new
// events, or, with all, every breaker whose counters moved.
func (h *hub) flush(all bool) {
	h.w.Sync()
	now := h.m.Clock().Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if all {
		h.scanLocked(now)
	}
	var changed []*entry
	for _, e := range h.order {
		if !all && !h.dirty[e] {
			continue
		}
		v := h.viewOf(e, now, all)
		if e.sent && v == e.last && len(e.fresh) == 0 {
			continue
		}
		e.last, e.sent = v, true
		changed = append(changed, e)
	}
	clear(h.dirty)
	if len(changed) == 0 && len(h.gone) == 0 && len(h.added) == 0 {
		return
	}
	h.seq++
	buf := make([]byte, 0, 256+64*len(changed))
	buf = append(buf, "event: delta\ndata: {\"seq\":"...)
	buf = strconv.AppendUint(buf, h.seq, 10)
	buf = h.appendHead(buf, now)
	buf = append(buf, `,"names":[`...)
	for i, e := range h.added {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendName(buf, e)
	}
	buf = append(buf, `],"gone":[`...)
	for i, id := range h.gone {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendInt(buf, int64(id), 10)
	}
	buf = append(buf, `],"b":[`...)
	for i, e := range changed {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendRecord(buf, e, e.last, e.fresh, now)
		e.fresh = e.fresh[:0]
	}
	buf = append(buf, "]}\n\n"...)
	h.added, h.gone = h.added[:0], h.gone[:0]
	h.ring = append(h.ring, message{seq: h.seq, data: buf})
	if len(h.ring) > ringSize {
		h.ring = h.ring[len(h.ring)-ringSize:]
	}
	close(h.changed)
	h.changed = make(chan struct{})
}

func (h *hub) appendHead(buf []byte, now time.Time) []byte {
	buf = append(buf, `,"now":`...)
	buf = strconv.AppendInt(buf, now.UnixMilli(), 10)
	buf = append(buf, `,"halted":`...)
	halted := false
	select {
	case <-h.m.Done():
		halted = true
	default:
	}
	return strconv.AppendBool(buf, halted)
}

// snapshot encodes every breaker in full, as a "snapshot" message, and
// returns it with the sequence number it is at and the channel closed at
// the next message.
func (h *hub) snapshot() ([]byte, uint64, <-chan struct{}) {
	h.w.Sync()
	now := h.m.Clock().Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	// Breakers registered since the last scan are in the snapshot, and
	// announced again by the next delta, which the page takes as known.
	h.scanLocked(now)
	buf := make([]byte, 0, 1024+96*len(h.order))
	buf = append(buf, "event: snapshot\ndata: {\"seq\":"...)
	buf = strconv.AppendUint(buf, h.seq, 10)
	buf = h.appendHead(buf, now)
	buf = append(buf, `,"title":`...)
	buf = appendString(buf, h.title)
	buf = append(buf, `,"actions":`...)
	buf = strconv.AppendBool(buf, h.actions)
	buf = append(buf, `,"process":`...)
	buf = appendString(buf, h.m.Name())
	buf = append(buf, `,"history":`...)
	buf = strconv.AppendInt(buf, int64(h.limit), 10)
	buf = append(buf, `,"names":[`...)
	for i, e := range h.order {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendName(buf, e)
	}
	buf = append(buf, `],"gone":[],"b":[`...)
	for i, e := range h.order {
		if i > 0 {
			buf = append(buf, ',')
		}
		// The breaker as it is now: a later delta may repeat it, which
		// changes nothing.
		v := h.viewOf(e, now, false)
		wire := make([]wireTransition, 0, len(e.wire))
		wire = append(append(wire, e.wire[e.start:]...), e.wire[:e.start]...)
		// The transitions not sent yet come with the next message.
		wire = wire[:max(len(wire)-len(e.fresh), 0)]
		buf = appendRecord(buf, e, v, wire, now)
	}
	buf = append(buf, "]}\n\n"...)
	return buf, h.seq, h.changed
}

// since returns the messages after seq and the channel closed at the next
// one, or ok false if the stream is too far behind and needs a snapshot.
func (h *hub) since(seq uint64) (msgs []message, next <-chan struct{}, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if seq == h.seq {
		return nil, h.changed, true
	}
	if len(h.ring) == 0 || h.ring[0].seq > seq+1 {
		return nil, h.changed, false
	}
	i := int(seq + 1 - h.ring[0].seq)
	return append([]message(nil), h.ring[i:]...), h.changed, true
}

// read returns a copy of the breaker's transitions, oldest first, and how
// many it missed, for the JSON status.
func (h *hub) read(name string) ([]TransitionRecord, uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.byName[name]
	if e == nil {
		return nil, 0
	}
	if len(e.recs) == 0 {
		return nil, e.missed
	}
	out := make([]TransitionRecord, 0, len(e.recs))
	out = append(out, e.recs[e.start:]...)
	out = append(out, e.recs[:e.start]...)
	return out, e.missed
}

// rate returns the breaker's call and failure rates over the last minute.
func (h *hub) rate(name string) (float64, float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.byName[name]; e != nil {
		return e.callsPS, e.failRate
	}
	return 0, 0
}

func (h *hub) sync() { h.w.Sync() }

func (h *hub) close() {
	h.once.Do(func() {
		close(h.quit)
		<-h.done
		h.w.Close()
	})
}

// The encodings of the stream's messages, documented in the package doc.

func appendName(buf []byte, e *entry) []byte {
	buf = append(buf, '[')
	buf = strconv.AppendInt(buf, int64(e.id), 10)
	buf = append(buf, ',')
	buf = appendString(buf, e.name)
	return append(buf, ']')
}

// stateIndex numbers the states from 0 for the page: closed, open,
// half_open, probing.
func stateIndex(s breaker.State) int64 { return int64(s) - int64(breaker.Closed) }

func appendRel(buf []byte, t, now time.Time) []byte {
	if t.IsZero() {
		return append(buf, "null"...)
	}
	return strconv.AppendInt(buf, t.Sub(now).Milliseconds(), 10)
}

func appendRecord(buf []byte, e *entry, v view, trs []wireTransition, now time.Time) []byte {
	flags := int64(0)
	if v.forced {
		flags |= 1
	}
	if v.shared {
		flags |= 2
	}
	if v.storeDown {
		flags |= 4
	}
	if v.dryRun {
		flags |= 8
	}
	buf = append(buf, '[')
	buf = strconv.AppendInt(buf, int64(e.id), 10)
	buf = append(buf, ',')
	buf = strconv.AppendInt(buf, stateIndex(v.state), 10)
	buf = append(buf, ',')
	buf = appendRel(buf, v.since, now)
	buf = append(buf, ',')
	buf = appendRel(buf, v.until, now)
	for _, n := range [...]int64{flags, int64(v.calls), int64(v.ok), int64(v.failures), int64(v.ignored),
		int64(v.declined), int64(v.stale), int64(v.drp), int64(v.missed), int64(v.slow), v.perSecond, v.failurePermille, v.processes,
		int64(v.would)} {
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, n, 10)
	}
	buf = append(buf, ',')
	buf = appendString(buf, v.why)
	buf = append(buf, ",["...)
	for i, t := range trs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, '[')
		buf = strconv.AppendInt(buf, stateIndex(t.from), 10)
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, stateIndex(t.to), 10)
		buf = append(buf, ',')
		buf = appendRel(buf, t.at, now)
		buf = append(buf, ',')
		buf = appendString(buf, t.cause.String())
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, int64(t.outcome), 10)
		if t.err != "" {
			buf = append(buf, ',')
			buf = appendString(buf, t.err)
		}
		buf = append(buf, ']')
	}
	// After the transitions, so that a page that knows only the fields
	// before them still reads them in their places.
	buf = append(buf, "],"...)
	buf = strconv.AppendFloat(buf, v.admitted, 'g', -1, 64)
	buf = append(buf, ',')
	buf = appendRel(buf, v.slowUntil, now)
	return append(buf, ']')
}

// appendString appends s as a JSON string, escaping what JSON requires
// and <, > and & as encoding/json does, and replacing invalid UTF-8.
func appendString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				buf = append(buf, '\\', c)
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				buf = append(buf, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			buf = append(buf, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			buf = append(buf, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			buf = append(buf, s[i:i+size]...)
		}
		i += size
	}
	return append(buf, '"')
}

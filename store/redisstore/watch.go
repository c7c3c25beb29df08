package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fusebox-go/fusebox/store"
	"github.com/redis/go-redis/v9"
)

// Watch implements store.Store. It subscribes to every channel changes
// are announced on: the classic channel, or, on a Cluster that announces
// on shard channels, the shard channel of every one of the 16,384 slots,
// on one connection per master. WatchNames subscribes to the channels of
// the breakers a caller names only.
func (s *Store) Watch(ctx context.Context, ready func(), fn func(store.Change)) error {
	if s.err != nil {
		return s.err
	}
	return s.watch(ctx, nil, func([]string) { ready() }, fn)
}

// WatchNames is Watch for the breakers names lists, which may change while
// it runs: on a Cluster that announces on shard channels, it subscribes
// only to the channels of the slots of those breakers, on their masters.
//
// It calls names when it starts, and again each time the channel names
// returned with the last list is ready to receive (closed, or sent a
// value); names returns every breaker to watch from then on, and a
// channel that becomes ready when that list changes next (nil if it never
// will). A caller appends and removes names and closes the channel it
// returned last, as Register and Remove would.
//
// It calls ready with breakers whose changes it can no longer miss: once
// with every breaker of the first list (none, if it is empty), once their
// subscriptions are in place, and then with the breakers each later list
// adds, once theirs are. A caller reads the state of the breakers ready
// names, as the caller of Watch reads after ready. It calls fn with every
// change of a breaker it watches, in order for each breaker, and perhaps
// with changes of others (on a shard channel, every breaker of the slot);
// a breaker dropped from the list may still be heard until the watch
// ends.
//
// It returns as Watch does: nil once ctx is done, or the error that ended
// a subscription (the store may then be unreachable; call it again, and
// every breaker of the first list is subscribed anew); the subscriptions
// of each list are bounded as Options.SubscribeTimeout says. names, ready
// and fn must not block; WatchNames calls them on the goroutine that
// called it.
func (s *Store) WatchNames(ctx context.Context, names func() ([]string, <-chan struct{}), ready func(names []string), fn func(store.Change)) error {
	if s.err != nil {
		return s.err
	}
	if names == nil || ready == nil || fn == nil {
		return errors.New("redisstore: WatchNames needs names, ready and fn")
	}
	return s.watch(ctx, names, ready, fn)
}

// namesSettle is how long a watch lets a changing list of names settle
// before it reads the list again: breakers registered in a loop are
// subscribed in a few batches, not with one pass over the whole list for
// each.
const namesSettle = time.Millisecond

// errSlotMoved is why a watch ends when a node drops one of its shard
// channels, as a Cluster does when the channel's slot moves to another
// node (a failover, a resharding).
var errSlotMoved = errors.New("the node dropped the subscription: the channel's slot moved to another node")

// watch runs Watch (names nil: every breaker) and WatchNames.
func (s *Store) watch(ctx context.Context, names func() ([]string, <-chan struct{}), ready func([]string), fn func(store.Change)) error {
	subCtx, cancel := context.WithTimeout(ctx, s.subscribe)
	sh, err := s.Sharded(subCtx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	w := &watcher{
		s:        s,
		sharded:  sh,
		ready:    ready,
		fn:       fn,
		heard:    make(chan heard, 256),
		subs:     map[string]*subscription{},
		channels: map[string]*channel{},
		names:    map[string]bool{},
	}
	w.readCtx, w.stopReading = context.WithCancel(context.WithValue(ctx, readerKey{}, true))
	defer w.close()

	var list []string
	var changed <-chan struct{}
	if names != nil {
		list, changed = names()
	}
	if err := w.add(ctx, list, names == nil); err != nil {
		return w.failed(ctx, err)
	}
	expiry := time.NewTimer(time.Hour)
	defer expiry.Stop()
	settle := time.NewTimer(time.Hour)
	defer settle.Stop()
	var settling <-chan time.Time
	for {
		var expired <-chan time.Time
		if len(w.waiting) > 0 {
			expiry.Reset(time.Until(w.waiting[0].deadline))
			expired = expiry.C
		}
		select {
		case <-ctx.Done():
			return nil
		case h := <-w.heard:
			if err := w.hear(h); err != nil {
				return w.failed(ctx, err)
			}
		case <-changed:
			changed = nil
			settle.Reset(namesSettle)
			settling = settle.C
		case <-settling:
			settling = nil
			list, changed = names()
			if err := w.add(ctx, list, false); err != nil {
				return w.failed(ctx, err)
			}
		case <-expired:
			b := w.waiting[0]
			return w.failed(ctx, fmt.Errorf("redisstore: subscribe to the channels of %d breakers: not confirmed within %v: %w", len(b.names), w.s.subscribe, context.DeadlineExceeded))
		}
	}
}

// readerKey marks the context of a watch's readers, so that the dial hook
// closes the connections dialled under it once the watch ends (see
// dials.DialHook).
type readerKey struct{}

// A watcher is one run of a watch: a subscription per node (one, to the
// classic channel, when changes are not announced on shard channels),
// each read by a goroutine of its own, and what it subscribed to and who
// waits for it. Its fields are the watch's goroutine's, but for the
// readers' heard, readCtx and readers.
type watcher struct {
	s       *Store
	sharded bool
	ready   func([]string)
	fn      func(store.Change)

	heard       chan heard
	readCtx     context.Context // the readers', ended with the watch
	stopReading context.CancelFunc
	readers     sync.WaitGroup

	subs     map[string]*subscription // by node address; "" for the classic channel
	channels map[string]*channel      // every channel subscribed to, by name
	names    map[string]bool          // every breaker asked for
	waiting  []*batch                 // batches not confirmed yet, oldest first
	started  bool                     // the first batch was made
}

// A subscription is a connection to one node and its goroutine.
type subscription struct {
	addr    string // "" for the classic channel
	ps      *redis.PubSub
	reading bool // its reader runs
}

// heard is what a reader received: a message, a confirmation, or the error
// that ended its subscription.
type heard struct {
	sub *subscription
	msg any
	err error
}

// A channel is one subscribed channel, and the batches that wait for its
// confirmation.
type channel struct {
	confirmed bool
	waiting   []*batch
}

// A batch is the breakers one reading of the list added: ready is called
// with them once each of their channels is confirmed.
type batch struct {
	names    []string
	left     int // channels not confirmed yet
	deadline time.Time
}

// add subscribes to the channels of the breakers of list it was not asked
// for before (all: to every channel changes are announced on) and calls
// ready with them once their channels are confirmed.
func (w *watcher) add(ctx context.Context, list []string, all bool) error {
	b := &batch{}
	var fresh []string // channels to subscribe to
	need := func(name string) {
		c := w.channels[name]
		if c == nil {
			c = &channel{}
			w.channels[name] = c
			fresh = append(fresh, name)
		}
		if !c.confirmed && (len(c.waiting) == 0 || c.waiting[len(c.waiting)-1] != b) {
			c.waiting = append(c.waiting, b)
			b.left++
		}
	}
	switch {
	case all && w.sharded:
		for slot := range slots {
			need(slotChannel(w.s.prefix, slot))
		}
	case all:
		need(w.s.channel)
	default:
		for _, n := range list {
			if w.names[n] {
				continue
			}
			w.names[n] = true
			b.names = append(b.names, n)
			if w.sharded {
				need(w.s.ShardChannel(n))
			} else {
				need(w.s.channel)
			}
		}
	}
	if err := w.subscribe(ctx, fresh); err != nil {
		return err
	}
	first := !w.started
	w.started = true
	switch {
	case b.left > 0:
		b.deadline = time.Now().Add(w.s.subscribe)
		w.waiting = append(w.waiting, b)
	case first || len(b.names) > 0:
		w.ready(b.names)
	}
	return nil
}

// subscribe subscribes to the channels names, each shard channel on the
// master of its slot, and starts the reader of each new connection. Each
// subscription must be written within SubscribeTimeout (the batch is then
// to be confirmed within SubscribeTimeout of the last); subscribe gives up
// once ctx is done. It sends one subscription to each master first, so
// that a master that cannot be reached (a failover the client has not
// seen yet) fails the watch before the others are sent thousands.
func (w *watcher) subscribe(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	if !w.sharded {
		// One channel, one subscription: the client picks the node. A
		// failure to subscribe comes back as the reader's first error.
		subCtx, cancel := context.WithTimeout(ctx, w.s.subscribe)
		defer cancel()
		sub := &subscription{ps: w.s.client.Subscribe(subCtx, names[0])}
		w.subs[""] = sub
		w.read(sub)
		return nil
	}
	cc := w.s.client.(*redis.ClusterClient) // sharded only on a Cluster
	// The client may read the layout from a node to find the masters.
	findCtx, cancel := context.WithTimeout(ctx, w.s.subscribe)
	defer cancel()
	var nodes []*subscription
	byNode := map[*subscription][]string{}
	for _, name := range names {
		node, err := cc.MasterForKey(findCtx, name)
		if err != nil {
			return fmt.Errorf("redisstore: find the master of shard channel %s: %w", name, err)
		}
		addr := node.Options().Addr
		sub := w.subs[addr]
		if sub == nil {
			sub = &subscription{addr: addr, ps: node.SSubscribe(ctx)}
			w.subs[addr] = sub
		}
		if _, ok := byNode[sub]; !ok {
			nodes = append(nodes, sub)
		}
		byNode[sub] = append(byNode[sub], name)
	}
	send := func(sub *subscription, name string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		subCtx, cancel := context.WithTimeout(ctx, w.s.subscribe)
		defer cancel()
		if err := sub.ps.SSubscribe(subCtx, name); err != nil {
			return fmt.Errorf("redisstore: subscribe to shard channel %s on %s: %w", name, sub.addr, err)
		}
		w.read(sub)
		return nil
	}
	for _, sub := range nodes {
		if err := send(sub, byNode[sub][0]); err != nil {
			return err
		}
	}
	for _, sub := range nodes {
		for _, name := range byNode[sub][1:] {
			if err := send(sub, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// read starts sub's reader, unless it runs: it hands every message,
// confirmation and error sub receives to the watch, until an error or the
// end of the watch.
func (w *watcher) read(sub *subscription) {
	if sub.reading {
		return
	}
	sub.reading = true
	w.readers.Add(1)
	go func() {
		defer w.readers.Done()
		for {
			msg, err := sub.ps.Receive(w.readCtx)
			select {
			case w.heard <- heard{sub: sub, msg: msg, err: err}:
			case <-w.readCtx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
}

// hear handles what a reader received.
func (w *watcher) hear(h heard) error {
	if h.err != nil {
		return fmt.Errorf("redisstore: watch %s: %w", w.what(h.sub), h.err)
	}
	switch m := h.msg.(type) {
	case *redis.Message:
		if c, ok := parseChange(m.Payload); ok {
			w.fn(c)
		}
	case *redis.Subscription:
		switch m.Kind {
		case "subscribe", "ssubscribe":
			w.confirm(m.Channel)
		case "unsubscribe", "sunsubscribe":
			// The watch never unsubscribes.
			return fmt.Errorf("redisstore: watch %s: %s: %w", w.what(h.sub), m.Channel, errSlotMoved)
		}
	}
	return nil
}

// confirm marks channel name confirmed, and calls ready with every batch
// that waited for it last.
func (w *watcher) confirm(name string) {
	c := w.channels[name]
	if c == nil || c.confirmed {
		return
	}
	c.confirmed = true
	for _, b := range c.waiting {
		if b.left--; b.left == 0 {
			w.waiting = slices.DeleteFunc(w.waiting, func(x *batch) bool { return x == b })
			w.ready(b.names)
		}
	}
	c.waiting = nil
}

// what names the channels of sub, for errors.
func (w *watcher) what(sub *subscription) string {
	if sub.addr == "" {
		return w.s.channel
	}
	return "the shard channels on " + sub.addr
}

// failed returns err as the watch's error, after asking a Cluster client
// to reload the cluster's layout if err says a node cannot be reached;
// nil once ctx is done, which is why a subscription was cut short.
func (w *watcher) failed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	now := time.Now()
	w.s.reload.after(err, now)
	return w.s.dials.explain(err, now)
}

// close ends every subscription and waits for the readers. A blocked read
// does not watch a context; closing its subscription ends it. A reader
// that reconnects holds its subscription's lock while it waits for the
// new connection's HELLO, which no context ends either: ending readCtx
// first closes that connection (see dials.DialHook), so that the Close
// does not wait for the partition to heal.
func (w *watcher) close() {
	w.stopReading()
	for _, sub := range w.subs {
		_ = sub.ps.Close()
	}
	w.readers.Wait()
}

// parseChange reads "kind|milliseconds|epoch|name", or, for an opening,
// "opened|milliseconds|epoch|length|reason name", where reason ("by\nwhy")
// is length bytes long.
func parseChange(p string) (store.Change, bool) {
	kind, rest, ok := strings.Cut(p, "|")
	if !ok {
		return store.Change{}, false
	}
	num, rest, ok := strings.Cut(rest, "|")
	if !ok {
		return store.Change{}, false
	}
	ep, name, ok := strings.Cut(rest, "|")
	if !ok {
		return store.Change{}, false
	}
	d, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return store.Change{}, false
	}
	e, err := strconv.ParseUint(ep, 10, 64)
	if err != nil {
		return store.Change{}, false
	}
	c := store.Change{Name: name, Epoch: e, Open: fromMS(d)}
	switch kind {
	case "opened":
		c.Kind = store.Opened
		num, rest, ok := strings.Cut(name, "|")
		n, err := strconv.Atoi(num)
		if !ok || err != nil || n < 0 || n > len(rest) {
			return store.Change{}, false
		}
		c.Reason, c.Name = parseReason(rest[:n]), rest[n:]
	case "closed":
		c.Kind, c.Open, c.SlowStart = store.Closed, 0, c.Open
	case "released":
		c.Kind = store.Released
	case "leased":
		c.Kind, c.Open, c.Probe = store.Leased, 0, c.Open
	case "reset":
		c.Kind = store.Reset
	case "forced":
		c.Kind = store.Forced
	default:
		return store.Change{}, false
	}
	return c, true
}

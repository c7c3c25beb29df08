package fleetsim

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

// The fleet's configuration: every process registers both breakers with
// these.
const (
	// StoreTimeout is every manager's Options.StoreTimeout.
	StoreTimeout = 500 * time.Millisecond
	// Resync is every manager's Options.Resync.
	Resync = 500 * time.Millisecond
	// OpenPeriod and ProbeTimeout are the breakers' recover.BasicTimeout.
	OpenPeriod   = time.Second
	ProbeTimeout = 300 * time.Millisecond
	// Threshold is the breakers' breaker.Consecutive Failures.
	Threshold = 3
	// SlowStart is the api breaker's Config.SlowStart.
	SlowStart = 2 * time.Second
)

// quorumOf returns the Config.Quorum of the breaker name.
func quorumOf(name string) int {
	if name == BreakerQuorum {
		return 2
	}
	return 1
}

var breakerNames = []string{BreakerAPI, BreakerQuorum}

// Entry is one line of a run's event log.
type Entry struct {
	At   time.Duration // from the start of the run, on the true clock
	Text string
}

// String returns the entry as the log prints it.
func (e Entry) String() string { return fmt.Sprintf("%12v %s", e.At, e.Text) }

// Result is what a run did.
type Result struct {
	Plan Plan
	// Log is every event of the run, in order of instant (and of text
	// at one instant, so that two runs of one seed compare equal).
	Log []Entry
	// Violation is the first invariant the run broke; nil if none.
	Violation *Violation
	// Checked is how many times each invariant was checked.
	Checked map[string]int
	// Calls and Trials count the callers' calls the service answered,
	// and the trial calls among them.
	Calls, Trials int
}

// proc is one life of a process: a manager, its breakers and its callers.
type proc struct {
	slot    int // which process; a twin's slot is past Plan.Procs
	id      int // this life's, unique in the run
	life    int
	replica int // who it is for a quorum: one replica, whatever its names
	name    string
	alias   string // how the log names it
	skew    time.Duration
	mgr     *manager.Manager
	brk     map[string]*manager.Breaker
	h       *handle
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started time.Duration

	// Guarded by the world's lock.
	alive      bool
	lastFault  time.Duration              // when a fault last touched it
	recoveries map[string][]time.Duration // when its probes succeeded, by breaker
	closings   map[string][]time.Duration // when a Closed change reached it, by breaker
	openedBy   map[string]error           // the Err of its last transition to open, by breaker
}

// world is one run: the store, the processes, the log and the
// invariants' state. Its lock guards what its methods say.
type world struct {
	plan  Plan
	draws draws
	start time.Time
	wg    sync.WaitGroup // goroutines spawned

	mu        sync.Mutex
	closed    bool
	mem       *store.Memory
	memStop   func()
	changes   []store.Change // made by the operation in progress
	subs      []*sub
	nextSub   int
	seq       uint64 // changes made
	log       []Entry
	procs     []*proc       // every life
	live      map[int]*proc // by slot
	aliases   map[string]string
	replace   *strings.Replacer // default names by aliases, in log lines
	nextID    int
	replicas  map[int]int // slot -> replica count
	oracles   map[string]*oracle
	pending   []*handForcing
	trials    []*trial
	violation *Violation
	checked   map[string]int // how often each invariant was checked
	calls     int
	ntrials   int
}

// now returns the time since the start of the run.
func (w *world) now() time.Duration { return time.Since(w.start) }

// logf adds a line to the log; w.mu is held.
func (w *world) logf(format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	if w.replace != nil {
		text = w.replace.Replace(text)
	}
	w.log = append(w.log, Entry{At: w.now(), Text: text})
}

// note is logf without the lock held.
func (w *world) note(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.logf(format, args...)
}

// faulted logs that a fault touched p, which the invariants that wait for
// a settled link then count from.
func (w *world) faulted(p *proc, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.faultedLocked(p, format, args...)
}

func (w *world) faultedLocked(p *proc, format string, args ...any) {
	p.lastFault = w.now()
	w.logf("%s "+format, append([]any{p.alias}, args...)...)
}

// spawn runs f on a goroutine the run waits for.
func (w *world) spawn(f func()) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		f()
	}()
}

// alias returns how the log names the process called name.
func (w *world) alias(name string) string {
	if a, ok := w.aliases[name]; ok {
		return a
	}
	return name
}

// status returns st as the log prints it, every field.
func (w *world) status(st store.Status) string {
	return fmt.Sprintf("[epoch=%d open=%v probe=%v forced=%v slow=%v by=%q why=%q]",
		st.Epoch, st.Open, st.Probe, st.Forced, st.SlowStart, w.alias(st.Reason.By), st.Reason.Why)
}

// read returns the status of breaker name in the Memory; w.mu is held.
func (w *world) read(name string) store.Status {
	st, _ := w.mem.Status(context.Background(), []string{name})
	return st[0]
}

// Run runs plan and returns what happened. It must run inside a
// testing/synctest bubble: it runs Plan.Duration of virtual time.
func Run(plan Plan) Result {
	w := &world{plan: plan, draws: plan.draws(), start: time.Now(), live: make(map[int]*proc),
		aliases: make(map[string]string), replicas: make(map[int]int), oracles: make(map[string]*oracle), checked: make(map[string]int)}
	for _, n := range breakerNames {
		w.oracles[n] = newOracle()
	}
	w.mu.Lock()
	w.newMemory()
	w.mu.Unlock()
	r := w.draws.rand(keyCaller, 0)
	for slot := range plan.Procs {
		time.Sleep(between(r, time.Millisecond, 5*time.Millisecond))
		kind := Crash // under its own name
		if plan.defaultNamed(slot) {
			kind = CrashDefaultName
		}
		w.startProc(slot, kind, -1)
	}
	done := make(chan struct{})
	w.spawn(func() { w.checkpoints(done) })
	for _, a := range w.timeline() {
		if w.violated() {
			break
		}
		time.Sleep(a.at - w.now())
		w.note("schedule: %s", a.what)
		a.do()
	}
	if !w.violated() {
		time.Sleep(plan.Duration - w.now())
	}
	close(done)
	w.stopAll()
	w.wg.Wait()
	w.mu.Lock()
	w.closed = true
	w.breakWatches(nil)
	w.memStop()
	res := Result{Plan: plan, Log: w.log, Violation: w.violation, Checked: w.checked, Calls: w.calls, Trials: w.ntrials}
	w.mu.Unlock()
	slices.SortStableFunc(res.Log, func(a, b Entry) int {
		if a.At != b.At {
			return int(a.At - b.At)
		}
		return strings.Compare(a.Text, b.Text)
	})
	return res
}

// action is one step of the timeline.
type action struct {
	at   time.Duration
	what string
	do   func()
}

// timeline returns the plan's events as actions, in order: the start and
// the end of each span.
func (w *world) timeline() []action {
	var list []action
	add := func(at time.Duration, what string, do func()) {
		list = append(list, action{at: at, what: what, do: do})
	}
	twins := 0
	for _, e := range w.plan.Events {
		switch e.Kind {
		case Partition:
			add(e.At, e.String(), func() {
				w.mu.Lock()
				w.breakWatches(e.Procs)
				w.mu.Unlock()
				w.touch(e.Procs)
			})
			add(e.End, "end of "+e.String(), func() { w.touch(e.Procs) })
		case Pause:
			add(e.At, e.String(), func() { w.touch(e.Procs) })
			add(e.End, "end of "+e.String(), func() { w.touch(e.Procs) })
		case Crash, CrashNewName, CrashDefaultName:
			add(e.At, e.String(), func() {
				for _, s := range e.Procs {
					w.stopProc(w.liveProc(s))
				}
			})
			add(e.End, "end of "+e.String(), func() {
				for _, s := range e.Procs {
					if w.liveProc(s) == nil {
						w.startProc(s, e.Kind, -1)
					}
				}
			})
		case Twin:
			slot := w.plan.Procs + twins
			twins++
			add(e.At, e.String(), func() { w.startProc(slot, Twin, e.Procs[0]) })
			add(e.End, "end of "+e.String(), func() { w.stopProc(w.liveProc(slot)) })
		case DataLoss:
			add(e.At, e.String(), w.dataLoss)
		case Force, Reset, RampReset:
			add(e.At, e.String(), func() { w.operate(e) })
		default:
			if e.Kind.span() {
				add(e.At, e.String(), func() {})
				add(e.End, "end of "+e.String(), func() {})
			}
		}
	}
	slices.SortStableFunc(list, func(a, b action) int { return int(a.at - b.at) })
	return list
}

// touch marks a fault on the live processes of slots.
func (w *world) touch(slots []int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range slots {
		if p := w.live[s]; p != nil {
			p.lastFault = w.now()
		}
	}
}

// liveProc returns the live process of slot, or nil.
func (w *world) liveProc(slot int) *proc {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.live[slot]
}

// startProc starts a life of the process of slot: kind says under which
// name (Crash: its own, CrashNewName: a new one, CrashDefaultName: the
// manager's default, Twin: the name of process of slot twinOf).
func (w *world) startProc(slot int, kind Kind, twinOf int) {
	w.mu.Lock()
	w.nextID++
	p := &proc{slot: slot, id: w.nextID, started: w.now(), recoveries: make(map[string][]time.Duration), closings: make(map[string][]time.Duration), openedBy: make(map[string]error)}
	for _, q := range w.procs {
		if q.slot == slot {
			p.life = q.life + 1
		}
	}
	if kind == CrashNewName && p.life > 0 {
		w.replicas[slot]++
	}
	p.replica = slot*1000 + w.replicas[slot]
	name := fmt.Sprintf("p%d", slot)
	for _, q := range w.procs {
		if q.slot == slot {
			name = q.name // a restart under the same name: its last life's
		}
	}
	switch kind {
	case CrashNewName:
		if p.life > 0 {
			name = fmt.Sprintf("p%d.%d", slot, w.replicas[slot])
		}
	case CrashDefaultName:
		name = ""
	case Twin:
		name = fmt.Sprintf("p%d", twinOf)
		for _, q := range w.procs {
			if q.slot == twinOf && q.name != "" {
				name = q.name // the name of its last life
			}
		}
		p.replica = -1 - slot
	}
	if slot < w.plan.Procs {
		p.skew = w.plan.Skew[slot]
	}
	w.mu.Unlock()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	p.mgr = manager.Start(manager.Options{Clock: newClock(p.skew), Logger: logger, Name: name, StoreTimeout: StoreTimeout, Resync: Resync})
	p.name = p.mgr.Name()
	p.alias = fmt.Sprintf("p%d", slot)
	if p.life > 0 {
		p.alias = fmt.Sprintf("p%d#%d", slot, p.life)
	}
	if kind == Twin {
		p.alias = fmt.Sprintf("twin%d(of p%d)", slot, twinOf)
	}
	p.h = &handle{w: w, proc: p, acquires: make(map[string]uint64), won: make(map[string]*lease)}
	w.mu.Lock()
	if name == "" {
		w.aliases[p.name] = p.alias
		var pairs []string
		for n, a := range w.aliases {
			if n != a && !strings.HasPrefix(n, "p") {
				pairs = append(pairs, n, a)
			}
		}
		w.replace = strings.NewReplacer(pairs...)
	} else if _, ok := w.aliases[p.name]; !ok {
		w.aliases[p.name] = p.name
	}
	p.alive = true
	p.lastFault = w.now()
	w.live[slot] = p
	w.procs = append(w.procs, p)
	w.logf("%s starts as %q", p.alias, p.name)
	w.mu.Unlock()
	events, _ := p.mgr.Subscribe(1024)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for e := range events {
			w.event(p, e)
		}
	}()
	p.brk = make(map[string]*manager.Breaker)
	// Each step of the start at an instant of its own: what the loop does
	// for one breaker does not race with the next one's Register.
	r := w.draws.rand(keyCaller, uint64(p.id), 1<<20)
	for _, n := range breakerNames {
		time.Sleep(between(r, 100*time.Microsecond, time.Millisecond))
		cfg := manager.Config{
			Strategy: breaker.Consecutive{Failures: Threshold},
			Recover:  recover.BasicTimeout{Open: cmp.Or(w.plan.OpenPeriod, OpenPeriod), ProbeTimeout: ProbeTimeout},
			Store:    p.h,
			Quorum:   quorumOf(n),
		}
		if n == BreakerAPI {
			cfg.SlowStart = SlowStart
		} else {
			cfg.Fallback = w.plan.QuorumFallback
		}
		b, err := p.mgr.Register(n, cfg)
		if err != nil {
			panic(fmt.Sprintf("fleetsim: register %s in %s: %v", n, p.alias, err))
		}
		p.brk[n] = b
	}
	time.Sleep(between(r, 100*time.Microsecond, time.Millisecond))
	var ctx context.Context
	ctx, p.cancel = context.WithCancel(context.Background())
	for bi, n := range breakerNames {
		for c := range w.plan.Callers {
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				w.caller(ctx, p, n, uint64(bi*16+c))
			}()
		}
	}
}

// event logs an event of p's manager, on the true clock.
func (w *world) event(p *proc, e manager.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	text := e.String()
	if e.Err != nil {
		text += fmt.Sprintf(" err=%q", e.Err.Error())
	}
	if !e.Until.IsZero() {
		text += fmt.Sprintf(" until=%v", e.Until.Add(-p.skew).Sub(w.start))
	}
	w.logf("%s event %s", p.alias, text)
	if e.Kind == manager.EventTransition && e.Transition.To == breaker.Open {
		p.openedBy[e.Name] = e.Err
	}
}

// stopProc stops p (nil: nothing): its callers, then its manager.
func (w *world) stopProc(p *proc) {
	if p == nil {
		return
	}
	w.mu.Lock()
	p.alive = false
	if w.live[p.slot] == p {
		delete(w.live, p.slot)
	}
	w.logf("%s stops", p.alias)
	for _, f := range w.pending {
		if f.proc == p {
			f.done = true
		}
	}
	w.mu.Unlock()
	p.cancel()
	p.mgr.Stop()
	p.wg.Wait()
}

// stopAll stops every live process.
func (w *world) stopAll() {
	w.mu.Lock()
	var list []*proc
	for _, p := range w.procs {
		if p.alive {
			list = append(list, p)
		}
	}
	w.mu.Unlock()
	for _, p := range list {
		w.stopProc(p)
	}
}

// dataLoss swaps the Memory for an empty one and breaks every watch, as a
// Redis restarted empty does.
func (w *world) dataLoss() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.newMemory()
	w.breakWatches(nil)
	for _, p := range w.live {
		p.lastFault = w.now()
	}
	w.lostData()
	w.storeChanged()
}

// operate runs an operator's Force or Reset: through a process's breaker
// handle, or on the store directly, as the command line does.
func (w *world) operate(e Event) {
	p := w.liveProc(e.Via)
	if e.Via >= 0 && p == nil {
		w.note("schedule: p%d is not running: on the store instead", e.Via)
	}
	if p == nil {
		w.exec(nil, "cli "+e.Kind.String(), func(m *store.Memory) string {
			var st store.Status
			if e.Kind == Force {
				st, _ = m.ForceOpen(context.Background(), e.Breaker)
				w.forced(nil, e.Breaker)
			} else {
				st, _ = m.Reset(context.Background(), e.Breaker)
				w.wasReset(e.Breaker)
			}
			return e.Breaker + " " + w.status(st)
		})
		return
	}
	b := p.brk[e.Breaker]
	w.mu.Lock()
	if e.Kind == Force {
		w.pending = append(w.pending, &handForcing{proc: p, breaker: e.Breaker, at: w.now()})
	} else {
		w.handReset(p, e.Breaker)
	}
	w.mu.Unlock()
	w.spawn(func() {
		var err error
		if e.Kind == Force {
			err = b.ForceOpen()
		} else {
			err = b.Reset()
		}
		w.note("%s handle %s %s returned %v", p.alias, e.Kind, e.Breaker, err)
	})
}

// checkpoints checks the invariants of the fleet's state every 100ms or
// so until done is closed.
func (w *world) checkpoints(done chan struct{}) {
	r := w.draws.rand(keyService, 1)
	for {
		t := time.NewTimer(between(r, 90*time.Millisecond, 110*time.Millisecond))
		select {
		case <-done:
			t.Stop()
			return
		case <-t.C:
		}
		w.mu.Lock()
		w.checkpoint()
		w.mu.Unlock()
	}
}

// violated reports whether an invariant was broken.
func (w *world) violated() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.violation != nil
}

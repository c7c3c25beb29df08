package manager

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/fleet"
	"github.com/fusebox-go/fusebox/internal/machine"
)

// Options configure a Manager. The zero value is valid.
type Options struct {
	// Clock is the clock of every breaker of the manager: the time of
	// transitions and the timers of open periods and probes. Nil means the
	// real clock; tests pass clock.NewMock().
	Clock clock.Clock
	// Logger receives the manager's reports: panics recovered from
	// callbacks, restarts, and why the manager stopped. Nil means
	// slog.Default().
	Logger *slog.Logger
	// MaxRestarts and RestartWindow limit supervision: the MaxRestarts-th
	// restart within RestartWindow halts the manager for good instead of
	// restarting (see FailOpen for what calls get then). Zero means 5 and
	// 10 seconds; negative values are logged and replaced by those
	// defaults.
	MaxRestarts   int
	RestartWindow time.Duration
	// RestartOne says which breakers a panic in a callback the manager
	// runs (Recover.Init, Recover.Timeout) restarts. False, the default,
	// restarts every breaker (one_for_all): Init is called again for each,
	// and each is closed, whatever its state, those open included. True
	// restarts only the breaker whose callback panicked (one_for_one); the
	// others keep their state and their timers. Either way, each restart
	// counts towards MaxRestarts.
	RestartOne bool
	// FailOpen says what calls get once the manager has halted after
	// MaxRestarts restarts. False, the default, declines them with
	// ErrStopped. True lets them through unprotected: Acquire returns a
	// permit, Do calls its function, no breaker trips any more, and
	// Stats.Unprotected counts them. Either way every breaker's State and
	// Stats.State report breaker.Halted, and an EventHalted is published
	// for each. After Stop, calls get ErrStopped whatever FailOpen says.
	FailOpen bool
	// Watchdog is how long a callback the manager runs (Recover.Init,
	// Recover.Timeout) may take before the manager logs it, with the
	// breaker's name and the callback's; it logs again each time the time
	// has doubled. While a callback runs, no breaker's timer fires, so a
	// callback that blocks holds up every breaker of the manager; calling
	// the manager (Sync, Register, Stop, ...) from a callback is the usual
	// cause, and blocks for good. Stop waits for a running callback for
	// at most Watchdog from its start: past that, it shuts the manager
	// down without the loop and returns, and the manager's goroutine ends
	// when the callback returns, without doing anything more. Watchdog is
	// real time, whatever Clock is: a mock clock does not move while a
	// callback blocks. Zero means one second; a negative value is
	// logged and replaced by it.
	Watchdog time.Duration
	// StoreTimeout bounds every call to the store of a shared breaker
	// (Config.Store): those a caller's Release makes on its goroutine
	// (see Permit.ReleaseOutcome), those the manager makes in the
	// background, and so how long Stop waits for them while the store
	// hangs. Zero means 500ms; a value below 1ms is logged and raised to
	// it.
	StoreTimeout time.Duration
	// Name names this process in a fleet sharing breakers through a
	// store (Config.Store): the store records it as the reporter of the
	// failures a quorum counts (Config.Quorum), as the holder of a probe
	// lease, and as the opener of a breaker, with the error that opened
	// it; the dashboard and the fusebox command line show it. Give each
	// process of a fleet a name of its own, such as its host or pod name.
	// The zero value means the host name, such as "web-7" (a pod's name
	// on Kubernetes), with "-2", "-3", ... after it for a second, third,
	// ... manager live at once in the process: a replica restarted keeps
	// its name, so that a quorum counts a crash loop as the one replica it
	// is. Two live processes of one name, such as two processes on one
	// host that both left Name empty, are found through the store and a
	// warning is logged: set Name for each. A name longer than 128 bytes, not valid
	// UTF-8, or holding a space or a character that is not printable is
	// logged, and every Register of a shared breaker fails with an error
	// that names the field; breakers that are not shared do not use it.
	Name string
	// Resync is how often the manager reads the shared state of every
	// shared breaker from its store, to catch changes it missed and to
	// notice that an unreachable store answers again. Zero means one
	// second; a value below 10ms is logged and raised to it
	// (a resync every nanosecond would keep the store and, on a mock
	// clock, mock.Add busy without end).
	Resync time.Duration
}

// Bounds of Options.StoreTimeout and Options.Resync.
const (
	minStoreTimeout = time.Millisecond
	minResync       = 10 * time.Millisecond
)

// Defaults for Options.
const (
	defaultMaxRestarts   = 5
	defaultRestartWindow = 10 * time.Second
)

// noteBuffer is how many transitions made by callers may wait for the
// manager before a caller making one more waits too.
const noteBuffer = 1024

// note is a transition for the manager to handle, usually made on a
// caller's goroutine.
type note struct {
	b    *Breaker
	step machine.Step
	// kind is the kind of event the step is published as.
	kind EventKind
	// sh, when set, is the shared breaker whose events of its link to
	// its store (EventStoreLost, EventStoreRestored), decided with or
	// before the step, are published once the step is applied, and
	// whose loop effects, decided on a caller's goroutine, then run; a
	// note with no step (a zero step.Gen) carries only those.
	sh      *shared
	effects []fleet.Effect
}

type registerReq struct {
	b     *Breaker
	reply chan error
}

// Manager runs a set of named breakers. Create one with Start and stop it
// with Stop. All its methods are safe for concurrent use, except that none
// may be called from a callback the manager itself runs (Recover.Init and
// Recover.Timeout). The zero Manager is not usable: its Register returns
// an error that says to make one with Start, and its other methods panic
// with that error.
type Manager struct {
	name        string // Options.Name: names the process to stores
	nameErr     error  // why Options.Name is refused, or nil
	number      int    // the number of the default name it took, or 0 (defaultProcessName)
	life        string // tells this life of the process from others of its name (newLife)
	clk         clock.Clock
	epoch       time.Time // clk.Now() at the start: timed calls count from it
	log         *slog.Logger
	maxRestarts int
	window      time.Duration

	notes        chan note
	registerc    chan registerReq
	syncc        chan chan struct{}
	subscribec   chan subscribeReq
	removec      chan removeReq
	reconfigurec chan reconfigureReq
	quit         chan struct{} // closed by Stop
	done         chan struct{} // closed when the loop has returned
	stopOnce     sync.Once

	stores stores // the hubs of shared breakers, and their store calls (hub.go)

	mu     sync.RWMutex // guards byName, list and holes, written only by the loop
	byName map[string]*Breaker
	// list holds the breakers in the order they were registered, each at
	// its Breaker.slot; a removed breaker leaves a nil hole, and the list
	// is compacted once holes are half of it, so that Remove is O(1)
	// amortized and keeps the order.
	list  []*Breaker
	holes int
	// closed is set once the manager shuts down: a Register that finds it
	// set inserts nothing, so that every breaker inserted is halted.
	closed bool

	groupsMu sync.Mutex
	groups   map[string]bool // the names of the groups made by Group

	// Owned by the loop.
	early  map[*Breaker][]note // steps that came before the one they follow (handleNote)
	timers timerHeap
	// goneTimers counts the removals since the heap was last rid of the
	// deadlines removed breakers leave (see forget).
	goneTimers int
	timer      *clock.Timer
	armed      bool      // the timer is set, for armedAt
	armedAt    time.Time // the deadline the timer is set for
	subs       []*subscriber
	restarts   []time.Time
	faults     []fault // callbacks that panicked; restart before the next request
	halted     bool

	// Supervision.
	restartOne    bool
	failOpen      bool
	watchdogAfter time.Duration
	crashed       atomic.Bool // halted after too many restarts
	failingOpen   atomic.Bool // crashed with FailOpen, and not stopped since
	running       atomic.Pointer[callbackRun]
	wake          chan struct{} // tells the watchdog a callback started
	doneOnce      sync.Once
}

// Start creates a manager and starts its goroutine.
func Start(opts Options) *Manager {
	m := newManager(opts)
	go m.run()
	go m.watchdog()
	return m
}

// newManager creates a manager without starting its goroutine, so that a
// test can own the loop.
func newManager(opts Options) *Manager {
	m := &Manager{
		name:          opts.Name,
		clk:           opts.Clock,
		log:           opts.Logger,
		maxRestarts:   opts.MaxRestarts,
		window:        opts.RestartWindow,
		notes:         make(chan note, noteBuffer),
		registerc:     make(chan registerReq),
		syncc:         make(chan chan struct{}),
		subscribec:    make(chan subscribeReq),
		removec:       make(chan removeReq),
		reconfigurec:  make(chan reconfigureReq),
		quit:          make(chan struct{}),
		done:          make(chan struct{}),
		byName:        make(map[string]*Breaker),
		restartOne:    opts.RestartOne,
		failOpen:      opts.FailOpen,
		watchdogAfter: opts.Watchdog,
		wake:          make(chan struct{}, 1),
	}
	if m.clk == nil {
		m.clk = clock.New()
	}
	m.epoch = m.clk.Now()
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.maxRestarts < 0 {
		m.logWarn("fusebox: Options.MaxRestarts is negative; using the default", "got", m.maxRestarts, "default", defaultMaxRestarts)
	}
	if m.maxRestarts <= 0 {
		m.maxRestarts = defaultMaxRestarts
	}
	if m.window < 0 {
		m.logWarn("fusebox: Options.RestartWindow is negative; using the default", "got", m.window, "default", defaultRestartWindow)
	}
	if m.window <= 0 {
		m.window = defaultRestartWindow
	}
	if m.watchdogAfter < 0 {
		m.logWarn("fusebox: Options.Watchdog is negative; using the default", "got", m.watchdogAfter, "default", defaultWatchdog)
	}
	if m.watchdogAfter <= 0 {
		m.watchdogAfter = defaultWatchdog
	}
	if m.name == "" {
		m.name, m.number = defaultProcessName()
	} else if m.nameErr = checkProcessName(m.name); m.nameErr != nil {
		m.logError("fusebox: Options.Name is refused; shared breakers cannot register", "error", m.nameErr)
	}
	m.life = newLife()
	m.stores.init(m, opts)
	return m
}

// started panics with errNotStarted if m was not made by Start: with no
// loop to serve it, a method would wait for good, or fail later with a
// message that blames something else.
func (m *Manager) started() {
	if !m.made() {
		panic(errNotStarted)
	}
}

// made reports whether m was made by Start (or newManager).
func (m *Manager) made() bool { return m != nil && m.done != nil }

// Clock returns the manager's clock.
func (m *Manager) Clock() clock.Clock {
	m.started()
	return m.clk
}

// elapsed is the time since the manager started, on its clock: monotonic
// with the real clock, so that a call's duration is the difference of two.
func (m *Manager) elapsed() time.Duration { return m.clk.Since(m.epoch) }

// Register adds a breaker named name, closed, and returns its handle. The
// zero Config is valid (see Config for the defaults). Register fails, with
// an error that names the breaker and the field at fault, if the name is
// not one a breaker may have (empty, longer than 256 bytes, not valid
// UTF-8, or not printable) or is taken
// (errors.Is(err, ErrDuplicate)), if the strategy's or the recovery
// policy's options are invalid or out of range (a *breaker.ConfigError
// names the field), if a callback of the Config panics while it is
// checked, if the manager has stopped (errors.Is(err, ErrStopped)), or if
// it was not made by Start (its error says to use Start). It never
// panics.
//
// Register of a breaker that is not shared (no Config.Store) does its work
// on the caller's goroutine, Recover.Init included, and does not wait for
// the manager's: it costs about what a map insert of a new breaker costs,
// however busy the manager is. A shared breaker's Register waits for the
// manager, which joins it to its store first.
func (m *Manager) Register(name string, cfg Config) (*Breaker, error) {
	if !m.made() {
		return nil, registerFailed(name, errNotStarted)
	}
	custom := cfg.Classify
	cfg, err := validateConfig(opRegister, name, cfg)
	if err != nil {
		return nil, err
	}
	st, err := initPolicy(cfg.Recover)
	if err != nil {
		return nil, registerError(name, "Recover", err)
	}
	return m.registerValid(name, cfg, custom == nil, st, nil)
}

// registerValid is Register for a name and a Config validateConfig
// accepted (with its defaults filled in); defaultClassify says that the
// Config's Classify was nil, and recState is the state of the Config's
// Recover, or initPending; own, if not nil, is called on the breaker
// before it is published (a Group marks it as its own).
//
// A local breaker is inserted here, on the caller's goroutine, without a
// round trip to the loop: the loop learns of it from its first note (a
// trip), which carries its handle, and until then has nothing to do for
// it. A shared breaker goes to the loop, which joins it to its store's hub
// first.
func (m *Manager) registerValid(name string, cfg Config, defaultClassify bool, recState any, own func(*Breaker)) (*Breaker, error) {
	var err error
	b := &Breaker{mgr: m, rec: cfg.Recover, recState: recState, truth: theLocal}
	b.setClassifier(cfg.Classify, defaultClassify)
	b.setTiming(cfg)
	b.dryRun.Store(cfg.DryRun)
	var sh *shared
	if cfg.Store != nil {
		if sh, err = newShared(b, name, cfg); err != nil {
			return nil, err
		}
		b.truth, b.hearsAll = sh, true
	}
	if p := guard(func() { err = b.mach.InitSlow(name, cfg.Strategy, cfg.SlowStart, m.clk.Now()) }); p != nil {
		err = fmt.Errorf("%T.NewCounter panicked: %v", cfg.Strategy, p.value)
	}
	if err != nil {
		return nil, registerError(name, "Strategy", err)
	}
	b.nextGen = b.mach.Snapshot().Gen + 1
	b.last = breaker.Closed
	if own != nil {
		own(b)
	}
	if sh == nil {
		if err := m.insert(b); err != nil {
			return nil, err
		}
		return b, nil
	}
	req := registerReq{b: b, reply: make(chan error, 1)}
	select {
	case m.registerc <- req:
	case <-m.done:
		return nil, registerFailed(name, ErrStopped)
	}
	if err := awaitReply(m, req.reply, ErrStopped); err != nil {
		if err == ErrStopped {
			err = registerFailed(name, ErrStopped)
		}
		return nil, err
	}
	return b, nil
}

// insert adds b to the breakers the manager holds, unless its name is
// taken or the manager has shut down.
func (m *Manager) insert(b *Breaker) error {
	name := b.Name()
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
		return registerFailed(name, ErrStopped)
	case m.byName[name] != nil:
		return registerFailed(name, ErrDuplicate)
	}
	m.byName[name] = b
	b.slot = len(m.list)
	m.list = append(m.list, b)
	return nil
}

// all returns every registered breaker, in the order they were
// registered.
func (m *Manager) all() []*Breaker {
	m.mu.RLock()
	defer m.mu.RUnlock()
	bs := make([]*Breaker, 0, len(m.list)-m.holes)
	for _, b := range m.list {
		if b != nil {
			bs = append(bs, b)
		}
	}
	return bs
}

// awaitReply waits for the loop's reply to a request it took, or, if the
// manager is done first without replying (Stop gave up on a loop stuck in
// a callback while it handled the request), returns stopped.
func awaitReply[T any](m *Manager, reply <-chan T, stopped T) T {
	select {
	case v := <-reply:
		return v
	case <-m.done:
		select {
		case v := <-reply:
			return v
		default:
			return stopped
		}
	}
}

// Breaker returns the breaker registered under name.
func (m *Manager) Breaker(name string) (*Breaker, bool) {
	m.started()
	m.mu.RLock()
	b, ok := m.byName[name]
	m.mu.RUnlock()
	return b, ok
}

// Breakers returns every registered breaker, in the order they were
// registered.
func (m *Manager) Breakers() []*Breaker {
	m.started()
	return m.all()
}

// Sync returns once the manager has handled every request and transition
// sent to it before the call, and every timer due at the clock's current
// time. With a mock clock, advance the clock and then call Sync: afterwards
// every state shows what the timers say.
//
// For shared breakers Sync is a barrier too: it waits for every store call
// the manager started before it (an opening, a probe's verdict, the resync
// due at the clock's time, the watch's first subscription), and for any
// call their results lead to, and applies their results; it also applies
// every change the store's watch delivered before it. store.NewMemory
// delivers a change before the call that made it returns, so with several
// managers on one memory store, a Sync of the manager whose call made a
// change and then a Sync of another leaves the other following it, with no
// wait on the clock. On another store the calls end within
// Options.StoreTimeout, and changes arrive when the store delivers them.
// The status reads of breakers that registered are among the calls it waits
// for, all of them, unless a read fails: the breakers left are then read
// after a pause on the clock, which Sync does not wait for. After Stop,
// Sync returns at once.
func (m *Manager) Sync() {
	m.started()
	for {
		// Once no call is in flight, the results of all of them are
		// in the loop's channel, and the turn drains them. A call the
		// turn started (or one started since) needs another round: it
		// may end, its result waiting, before a check that it is busy.
		started := m.stores.calls.wait()
		m.syncLoop()
		if !m.stores.calls.since(started) {
			return
		}
		select {
		case <-m.done:
			return
		default:
		}
	}
}

// syncLoop is one round trip to the loop for Sync.
func (m *Manager) syncLoop() {
	reply := make(chan struct{})
	select {
	case m.syncc <- reply:
	case <-m.done:
		return
	}
	select {
	case <-reply:
	case <-m.done:
	}
}

// Stop stops the manager and waits for its goroutine to return. Afterwards
// Acquire, Do, Call and Register return ErrStopped, subscription channels are
// closed, and no goroutine of the manager is left. Calling Stop more than
// once, or after the manager stopped itself, does nothing more.
func (m *Manager) Stop() {
	m.started()
	m.stopOnce.Do(func() { close(m.quit) })
	<-m.done
	m.failingOpen.Store(false)
}

// Done returns a channel that is closed once the manager has stopped, by
// Stop or because its callbacks panicked too often.
func (m *Manager) Done() <-chan struct{} {
	m.started()
	return m.done
}

// notify hands a transition made on a caller's goroutine to the manager.
func (m *Manager) notify(b *Breaker, s machine.Step) { m.send(note{b: b, step: s}) }

// send hands n to the loop, unless the manager stops first: its loop has
// returned, or is stopping the store goroutines, one of which may be the
// sender (a resync's report of a window's successes can trip a breaker).
func (m *Manager) send(n note) {
	select {
	case m.notes <- n:
	case <-m.done:
	case <-m.stores.ctx.Done():
	}
}

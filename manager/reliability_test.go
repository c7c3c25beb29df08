package manager_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// LongEnv is the environment variable that makes the reliability tests run
// long: FUSEBOX_LONG=1 uses each test's long length, and a Go duration
// (FUSEBOX_LONG=3m) sets the length of the load tests. By default they run
// for a few seconds, as CI does.
const LongEnv = "FUSEBOX_LONG"

// runLength returns short, or long when FUSEBOX_LONG says so.
func runLength(t testing.TB, short, long time.Duration) time.Duration {
	t.Helper()
	switch v := os.Getenv(LongEnv); v {
	case "", "0":
		return short
	case "1":
		return long
	default:
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want 1 or a positive Go duration such as 3m", LongEnv, v)
		}
		return d
	}
}

// loadSpec is one breaker of a load test and what may be checked of it.
type loadSpec struct {
	name string
	cfg  manager.Config
	// strict: no probe can be forgotten (the probe time is far longer than
	// any call, and nothing resets the breaker), so at most one probe call
	// is ever in flight, and every probe's outcome shows in the events.
	strict bool
	// slowProbe: some probe calls outlive the probe time.
	slowProbe bool
	// chaos: a goroutine forces the breaker open and resets it at random.
	chaos bool
	// minOpen and minProbe are the shortest open period and probe time
	// the Recover hands out; exact says it always hands out exactly those.
	minOpen, minProbe time.Duration
	exact             bool
	// failPct is the share of calls that fail, in percent.
	failPct int
}

// loadBreaker is a breaker under load and what its callers counted.
type loadBreaker struct {
	spec loadSpec
	b    *manager.Breaker

	// gate is held for reading around each Acquire and each Release with
	// the counting that goes with it; a checkpoint holds it for writing, so
	// that it sees Stats and these counters at rest while calls are in
	// flight.
	gate sync.RWMutex
	// attempts are Acquires that returned a permit or were declined:
	// the calls Stats counts once finished. started also counts the
	// Acquires refused otherwise (a done context, ErrStopped), which
	// refused counts.
	started, refused, attempts, finished, inflight atomic.Int64
	// What the callers saw.
	successes, failures, ignored, declined atomic.Int64
	stopped                                atomic.Int64 // Acquires that got ErrStopped
	probes                                 atomic.Int64
	probeOutcome                           [4]atomic.Int64 // by classify.Outcome
	probesInFlight                         atomic.Int32
	maxProbesInFlight                      atomic.Int32
}

// load drives many goroutines through the breakers of one manager on the
// real clock and checks invariants all along:
//   - never two probe calls in flight for a strict breaker (an atomic
//     counter inside the probe call);
//   - each breaker's event stream is a path through the state graph (see
//     checkEdge), with the generation one further at each change, and every
//     timer event ends a period Recover set, no earlier than it was due;
//   - attempts = Stats.Calls + calls in flight, exactly, at quiesced
//     checkpoints, and between them within the window the counters move in.
//
// finish checks the rest once the callers have stopped: the exact counts,
// probes against events, every period ended, no dropped event, and no
// goroutine left after Stop.
type load struct {
	t        *testing.T
	m        *manager.Manager
	breakers []*loadBreaker
	workers  int
	seed     uint64
	leaks    goleak.Option

	stop     chan struct{}
	wg       sync.WaitGroup // callers and chaos goroutines
	watchers sync.WaitGroup // the event consumer and the checker

	paths      *pathChecker
	pathsMu    sync.Mutex
	pathErrs   atomic.Int64
	checks     atomic.Int64 // invariant checks made
	probeViols atomic.Int64
	timerWatch map[string]*timerWatch
	halted     bool // the manager stopped by itself, under load
}

// timerWatch follows the timed periods of one breaker in its events.
type timerWatch struct {
	spec      loadSpec
	since     time.Time
	timed     bool // the current state was entered by a transition that arms a Recover timer
	timerEnds int  // timed periods ended by their timer
}

// startLoad registers the breakers of specs on m and starts workers callers
// per breaker. leaks is taken before m was started.
func startLoad(t *testing.T, m *manager.Manager, leaks goleak.Option, specs []loadSpec, workers int) *load {
	t.Helper()
	l := &load{
		t: t, m: m, workers: workers, leaks: leaks,
		seed:       uint64(time.Now().UnixNano()),
		stop:       make(chan struct{}),
		paths:      newPathChecker(),
		timerWatch: map[string]*timerWatch{},
	}
	t.Logf("seed %d", l.seed)
	events, _ := m.Subscribe(1 << 16) // closed by Stop
	for _, s := range specs {
		b, err := m.Register(s.name, s.cfg)
		require.NoError(t, err, "Register(%q)", s.name)
		l.breakers = append(l.breakers, &loadBreaker{spec: s, b: b})
		l.timerWatch[s.name] = &timerWatch{spec: s}
	}
	l.watchers.Add(1)
	go func() {
		defer l.watchers.Done()
		for e := range events {
			l.onEvent(e)
		}
	}()
	for bi, lb := range l.breakers {
		for w := range workers {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				l.caller(lb, rand.New(rand.NewPCG(l.seed, uint64(bi*1000+w))))
			}()
		}
		if lb.spec.chaos {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				l.chaos(lb, rand.New(rand.NewPCG(l.seed, uint64(bi*1000+999))))
			}()
		}
	}
	return l
}

func (l *load) onEvent(e manager.Event) {
	l.pathsMu.Lock()
	defer l.pathsMu.Unlock()
	l.checks.Add(1)
	if err := l.paths.feed(e); err != nil {
		if l.pathErrs.Add(1) <= 5 {
			l.t.Errorf("event path: %v", err)
		}
		return
	}
	w := l.timerWatch[e.Name]
	if w == nil || !changesState(e) {
		return
	}
	if e.Cause == breaker.CauseTimer {
		l.checks.Add(1)
		min := w.spec.minOpen
		if e.Transition.From == breaker.Probing {
			min = w.spec.minProbe
		}
		took := e.At.Sub(w.since)
		switch {
		case !w.timed:
			l.t.Errorf("%s: a timer ended %v, which no Recover timer was armed for (entered at %v)", e.Name, e.Transition.From, w.since)
		case took < min || (w.spec.exact && took != min):
			l.t.Errorf("%s: the timer of %v fired %v after it was entered; the period was %v", e.Name, e.Transition.From, took, min)
		}
		w.timerEnds++
	}
	w.since = e.At
	tr := e.Transition
	w.timed = e.Cause != breaker.CauseForceOpen && e.Cause != breaker.CauseShared &&
		(tr == breaker.Transition{From: breaker.Closed, To: breaker.Open} ||
			tr == breaker.Transition{From: breaker.Probing, To: breaker.Open} ||
			tr == breaker.Transition{From: breaker.HalfOpen, To: breaker.Probing})
}

// caller makes calls through lb until the load stops or the manager has
// stopped.
func (l *load) caller(lb *loadBreaker, r *rand.Rand) {
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		switch n := r.IntN(20); {
		case n == 0: // cancelled before the call
			ctx, cancel = context.WithCancel(ctx)
			cancel()
		case n == 1: // cancelled from another goroutine during the call
			ctx, cancel = context.WithCancel(ctx)
			stop := time.AfterFunc(time.Duration(r.IntN(200))*time.Microsecond, cancel)
			defer stop.Stop()
		}

		lb.gate.RLock()
		lb.started.Add(1)
		p, err := lb.b.Acquire(ctx)
		switch {
		case err == nil:
			lb.attempts.Add(1)
			lb.inflight.Add(1)
		case errors.Is(err, breaker.ErrOpen):
			lb.attempts.Add(1)
			lb.declined.Add(1)
			lb.finished.Add(1)
		case errors.Is(err, manager.ErrStopped):
			lb.refused.Add(1)
			lb.stopped.Add(1)
		case errors.Is(err, context.Canceled):
			lb.refused.Add(1)
		default:
			l.t.Errorf("%s: Acquire returned %v", lb.spec.name, err)
			lb.refused.Add(1)
		}
		lb.gate.RUnlock()
		if err != nil {
			cancel()
			if errors.Is(err, manager.ErrStopped) {
				return
			}
			runtime.Gosched()
			continue
		}

		probe := p.Probe()
		if probe {
			lb.probes.Add(1)
			n := lb.probesInFlight.Add(1)
			for {
				old := lb.maxProbesInFlight.Load()
				if n <= old || lb.maxProbesInFlight.CompareAndSwap(old, n) {
					break
				}
			}
			if lb.spec.strict {
				l.checks.Add(1)
				if n > 1 && l.probeViols.Add(1) <= 5 {
					l.t.Errorf("%s: %d probe calls in flight", lb.spec.name, n)
				}
			}
		}
		callErr := l.call(ctx, lb, r, probe)
		if probe {
			lb.probesInFlight.Add(-1)
		}
		o := classify.Default(callErr)

		lb.gate.RLock()
		p.Release(callErr)
		switch o {
		case classify.Success:
			lb.successes.Add(1)
		case classify.Failure:
			lb.failures.Add(1)
		case classify.Ignore:
			lb.ignored.Add(1)
		}
		if probe {
			lb.probeOutcome[o].Add(1)
		}
		lb.inflight.Add(-1)
		lb.finished.Add(1)
		lb.gate.RUnlock()
		cancel()
	}
}

// call is the work behind a permit: quick or a little slow, and failing at
// the breaker's rate; a call whose context is done returns its error.
func (l *load) call(ctx context.Context, lb *loadBreaker, r *rand.Rand, probe bool) error {
	var d time.Duration
	switch n := r.IntN(8); {
	case probe && lb.spec.slowProbe && n < 3:
		// Up to three probe times: on a quiet machine too, some outlive
		// theirs (one probe time at most would, only when the manager
		// is late).
		d = time.Duration(r.Int64N(int64(3 * lb.spec.minProbe)))
	case n == 0:
		d = time.Duration(r.IntN(300)) * time.Microsecond
	case n < 4:
		runtime.Gosched()
	}
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fail := lb.spec.failPct
	if probe {
		fail = 50
	}
	if r.IntN(100) < fail {
		return errBoom
	}
	return nil
}

// chaos forces lb open and resets it at random.
func (l *load) chaos(lb *loadBreaker, r *rand.Rand) {
	for {
		t := time.NewTimer(time.Duration(r.IntN(3000)) * time.Microsecond)
		select {
		case <-l.stop:
			t.Stop()
			return
		case <-t.C:
		}
		var err error
		if r.IntN(3) == 0 {
			err = lb.b.ForceOpen()
		} else {
			err = lb.b.Reset()
		}
		if errors.Is(err, manager.ErrStopped) {
			return
		}
		if err != nil {
			l.t.Errorf("%s: chaos: %v", lb.spec.name, err)
		}
	}
}

// checkpoint stops each breaker's callers at the gate in turn and checks
// its counts exactly: attempts = Stats.Calls + calls in flight, and each
// outcome as the callers counted it.
func (l *load) checkpoint() {
	for _, lb := range l.breakers {
		lb.gate.Lock()
		st := lb.b.Stats()
		att, inflight := lb.attempts.Load(), lb.inflight.Load()
		got := [4]uint64{st.Successes, st.Failures, st.Ignored, st.Declined}
		want := [4]uint64{uint64(lb.successes.Load()), uint64(lb.failures.Load()), uint64(lb.ignored.Load()), uint64(lb.declined.Load())}
		lb.gate.Unlock()
		l.checks.Add(2)
		if uint64(att) != st.Calls+uint64(inflight) {
			l.t.Errorf("%s: %d attempts, but Stats.Calls %d + %d in flight", lb.spec.name, att, st.Calls, inflight)
		}
		if got != want {
			l.t.Errorf("%s: successes, failures, ignored, declined: Stats %v, callers %v", lb.spec.name, got, want)
		}
	}
}

// window checks the counts without stopping anyone: every call finished
// before Stats was read is in it, and no call started after.
func (l *load) window() {
	for _, lb := range l.breakers {
		done := lb.finished.Load()
		st := lb.b.Stats()
		started := lb.started.Load()
		l.checks.Add(1)
		if uint64(done) > st.Calls || st.Calls > uint64(started) {
			l.t.Errorf("%s: Stats.Calls %d outside [%d finished before, %d started after]", lb.spec.name, st.Calls, done, started)
		}
	}
}

// run lets the load go on for d, checking as it goes, then stops the
// callers: they must all return within a few seconds.
func (l *load) run(d time.Duration) {
	l.t.Helper()
	l.runFor(d)
	l.stopCallers()
}

// runFor lets the load go on for d, or until the manager stops, checking
// as it goes.
func (l *load) runFor(d time.Duration) {
	end := time.Now().Add(d)
	next := time.Now()
	for time.Now().Before(end) && !l.t.Failed() {
		select {
		case <-l.m.Done():
			end = time.Now()
			continue
		case <-time.After(2 * time.Millisecond):
		}
		l.window()
		if time.Now().After(next) {
			l.checkpoint()
			next = time.Now().Add(25 * time.Millisecond)
		}
	}
}

// once makes one call through lb that ends with err, counted as the
// callers count theirs. It returns Acquire's error.
func (l *load) once(lb *loadBreaker, err error) error {
	lb.gate.Lock()
	defer lb.gate.Unlock()
	lb.started.Add(1)
	p, aerr := lb.b.Acquire(context.Background())
	if aerr != nil {
		if !errors.Is(aerr, breaker.ErrOpen) {
			lb.refused.Add(1)
			return aerr
		}
		lb.attempts.Add(1)
		lb.declined.Add(1)
		lb.finished.Add(1)
		return aerr
	}
	lb.attempts.Add(1)
	if p.Probe() {
		lb.probes.Add(1)
	}
	p.Release(err)
	o := classify.Default(err)
	switch o {
	case classify.Success:
		lb.successes.Add(1)
	case classify.Failure:
		lb.failures.Add(1)
	default:
		lb.ignored.Add(1)
	}
	if p.Probe() {
		lb.probeOutcome[o].Add(1)
	}
	lb.finished.Add(1)
	return nil
}

// stopCallers stops the callers and waits for them, failing if any is
// still blocked after a few seconds.
func (l *load) stopCallers() {
	l.t.Helper()
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		l.t.Fatalf("callers still blocked 10s after the load stopped:\n%s", buf)
	}
}

// settle waits, for a bounded time, until no breaker is in a timed open
// period or probe: every timer armed must fire.
func (l *load) settle() {
	l.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var busy []string
		for _, lb := range l.breakers {
			s := lb.b.Snapshot()
			if !s.Halted && !s.Forced && (s.State == breaker.Open || s.State == breaker.Probing) {
				busy = append(busy, fmt.Sprintf("%s %v until %v", lb.spec.name, s.State, s.Until))
			}
		}
		if len(busy) == 0 {
			return
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("5s after the load, timers have still not ended: %s", strings.Join(busy, ", "))
		}
		time.Sleep(time.Millisecond)
	}
}

// loadFigures are the totals of a load test.
type loadFigures struct {
	goroutines, calls, probes, events, checks int64
}

// finish stops the manager and checks what can only be checked at the
// end. It returns the run's figures.
func (l *load) finish() loadFigures {
	l.t.Helper()
	l.checkpoint()
	select {
	case <-l.m.Done():
		l.halted = true
	default:
	}
	l.m.Stop()
	l.watchers.Wait()
	l.checkpoint() // the counts stay right after Stop

	var fig loadFigures
	fig.goroutines = int64(len(l.breakers) * l.workers)
	for _, lb := range l.breakers {
		name := lb.spec.name
		st := lb.b.Stats()
		fig.calls += lb.attempts.Load()
		fig.probes += lb.probes.Load()
		assert.Zero(l.t, lb.inflight.Load(), "%s: calls in flight at the end", name)
		assert.Equal(l.t, uint64(lb.attempts.Load()), st.Calls, "%s: every attempt is in Stats.Calls", name)
		assert.Equal(l.t, lb.started.Load(), lb.attempts.Load()+lb.refused.Load(), "%s: every Acquire was counted once", name)
		assert.Zero(l.t, st.DroppedEvents, "%s: dropped events", name)

		p := l.paths
		H, P, C, O := breaker.HalfOpen, breaker.Probing, breaker.Closed, breaker.Open
		probeStarts := p.count(name, H, P, breaker.CauseProbe)
		if l.halted {
			// A probe taken just before the manager stopped is never
			// published.
			assert.LessOrEqual(l.t, probeStarts, int(lb.probes.Load()), "%s: half_open->probing events and probes granted", name)
		} else {
			assert.Equal(l.t, int(lb.probes.Load()), probeStarts, "%s: probes granted and half_open->probing events", name)
		}
		if lb.spec.strict {
			assert.LessOrEqual(l.t, lb.maxProbesInFlight.Load(), int32(1), "%s: probes in flight at once", name)
			assert.Equal(l.t, int(lb.probeOutcome[classify.Success].Load()), p.count(name, P, C, breaker.CauseProbe), "%s: successful probes and probing->closed", name)
			assert.Equal(l.t, int(lb.probeOutcome[classify.Failure].Load()), p.count(name, P, O, breaker.CauseProbe), "%s: failed probes and probing->open", name)
			assert.Equal(l.t, int(lb.probeOutcome[classify.Ignore].Load()), p.count(name, P, H, breaker.CauseProbe), "%s: ignored probes and probing->half_open", name)
			assert.Zero(l.t, p.count(name, P, H, breaker.CauseTimer), "%s: no probe outlives its time", name)
		}
		if lb.spec.slowProbe && !testing.Short() {
			assert.Positive(l.t, p.count(name, P, H, breaker.CauseTimer), "%s: some probes outlived their time", name)
		}
		l.checks.Add(8)
	}
	fig.events = int64(l.paths.events)
	fig.checks = l.checks.Load()
	goleak.VerifyNone(l.t, l.leaks)
	return fig
}

// stressSpecs are the breakers of the stress test.
func stressSpecs() []loadSpec {
	hour := time.Hour
	return []loadSpec{
		{
			name:    "consecutive",
			cfg:     manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Recover: recover.BasicTimeout{Open: 2 * time.Millisecond, ProbeTimeout: hour}},
			strict:  true,
			minOpen: 2 * time.Millisecond, minProbe: hour, exact: true,
			failPct: 40,
		},
		{
			name: "failure-rate",
			cfg: manager.Config{
				Strategy: breaker.FailureRate{Rate: 0.5, Window: 20, MinCalls: 10},
				Recover:  recover.Exponential{Initial: time.Millisecond, Max: 8 * time.Millisecond, Jitter: 0.5, ProbeTimeout: hour},
			},
			strict:  true,
			minOpen: 500 * time.Microsecond, minProbe: hour,
			failPct: 45,
		},
		{
			name: "time-window",
			cfg: manager.Config{
				Strategy: breaker.TimeWindow{Rate: 0.5, Period: 20 * time.Millisecond, Buckets: 4, MinCalls: 10},
				Recover:  recover.BasicTimeout{Open: 3 * time.Millisecond, ProbeTimeout: hour},
			},
			strict:  true,
			minOpen: 3 * time.Millisecond, minProbe: hour, exact: true,
			failPct: 45,
		},
		{
			name:      "probe-timeout",
			cfg:       manager.Config{Strategy: breaker.Consecutive{Failures: 2}, Recover: recover.BasicTimeout{Open: time.Millisecond, ProbeTimeout: time.Millisecond}},
			slowProbe: true,
			minOpen:   time.Millisecond, minProbe: time.Millisecond, exact: true,
			failPct: 40,
		},
		{
			name:    "chaos",
			cfg:     manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Recover: recover.BasicTimeout{Open: 2 * time.Millisecond, ProbeTimeout: 5 * time.Millisecond}},
			chaos:   true,
			minOpen: 2 * time.Millisecond, minProbe: 5 * time.Millisecond, exact: true,
			failPct: 40,
		},
	}
}

// TestStressInvariants: 64 goroutines per breaker over five breakers (three
// strategies, two recovery policies, probes that outlive their time, a
// breaker forced open and reset at random), on the real clock with open
// periods of a few milliseconds, random outcomes and random cancellations,
// for two seconds (FUSEBOX_LONG=1: two minutes), while GOMAXPROCS changes
// every 20ms. See load for the
// invariants checked all the way, and load.finish for those checked at
// the end.
func TestStressInvariants(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	d := runLength(t, 2*time.Second, 2*time.Minute)
	m := manager.Start(manager.Options{Logger: quietLogger})
	defer m.Stop()
	const workers = 64
	l := startLoad(t, m, leaks, stressSpecs(), workers)
	// The per-P lines of the stats counters must not lose a call when
	// the number of Ps changes under load.
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	flips := make(chan struct{})
	go func() {
		defer close(flips)
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.GOMAXPROCS(1 + i%4)
		}
	}()
	l.run(d)
	<-flips
	runtime.GOMAXPROCS(procs)
	for _, lb := range l.breakers {
		if lb.spec.chaos {
			require.NoError(t, lb.b.Reset(), "lifting the chaos breaker's forced open")
		}
	}
	l.settle()
	fig := l.finish()
	reportFigures(t, "stress", d, fig, 0)
}

// reportFigures logs a load test's figures in one line that
// scripts/long-tests.sh collects.
func reportFigures(t *testing.T, test string, d time.Duration, fig loadFigures, restarts int) {
	t.Logf("FIGURES %s: duration=%v goroutines=%d calls=%d probes=%d events=%d restarts=%d checks=%d",
		test, d, fig.goroutines, fig.calls, fig.probes, fig.events, restarts, fig.checks)
}

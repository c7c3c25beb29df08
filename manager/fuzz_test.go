package manager_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// FuzzBreakerModel decodes its input into a script of operations on one
// breaker and plays it against both a real manager (on a mock clock, with
// Sync after every step) and refModel, the reference model in
// model_test.go. After every step it compares what the caller got (a
// permit, the probe, a declined call's OpenError, ErrStopped), the events
// published, the Recover.Timeout calls made (which transition, which
// outcome, when), the Init calls, the snapshot (state, generation, since,
// until, forced, halted) and the counters of Stats.
//
// The input is a header of four bytes (the strategy and the slow start, the
// Recover's periods, the supervision limits) and then pairs of bytes: an operation and its
// argument. See decodeScript. The seed corpus in
// testdata/fuzz/FuzzBreakerModel covers every edge of the state graph (see
// TestFuzzSeedCorpus); go test replays it on every run, and
//
//	go test ./manager -run '^$' -fuzz FuzzBreakerModel -fuzztime 5m
//
// searches for more.
func FuzzBreakerModel(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		runScript(t, data)
	})
}

// fuzzOpKind is one operation of a script.
type fuzzOpKind uint8

const (
	// opAcquire asks for a permit; one granted joins the held permits.
	opAcquire fuzzOpKind = iota
	// opAcquireCancelled asks with a context that is already done.
	opAcquireCancelled
	// opRelease releases the newest held permit with Release(err): the
	// argument picks nil, a failure or context.Canceled.
	opRelease
	// opReleaseOldest releases the oldest held permit with ReleaseOutcome:
	// usually one granted before the breaker moved on, a stale release.
	opReleaseOldest
	// opReleaseKeep releases the newest held permit but keeps it, so that
	// it is released again later (a documented misuse: it counts twice).
	opReleaseKeep
	// opAdvance moves the clock by the argument in milliseconds.
	opAdvance
	// opAdvanceEdge moves the clock to the pending timer's deadline, one
	// nanosecond before it or one after (argument % 3): the timer edges.
	opAdvanceEdge
	// opForceOpen and opReset are Breaker.ForceOpen and Breaker.Reset.
	opForceOpen
	opReset
	// opPanicTimeout makes the next Recover.Timeout call panic.
	opPanicTimeout
	// opPanicInit makes the next Recover.Init call (on a restart) panic.
	opPanicInit

	numFuzzOps
)

var fuzzOpNames = [numFuzzOps]string{
	"acquire", "acquire-cancelled", "release", "release-oldest", "release-keep",
	"advance", "advance-edge", "force-open", "reset", "panic-timeout", "panic-init",
}

type fuzzOp struct {
	kind fuzzOpKind
	arg  byte
}

func (o fuzzOp) String() string {
	switch o.kind {
	case opRelease, opReleaseOldest, opReleaseKeep:
		return fmt.Sprintf("%s(%v)", fuzzOpNames[o.kind], fuzzOutcome(o.arg))
	case opAdvance:
		return fmt.Sprintf("advance(%dms)", o.arg)
	case opAdvanceEdge:
		return fmt.Sprintf("advance-edge(%+dns)", int(o.arg%3)-1)
	}
	return fuzzOpNames[o.kind]
}

func fuzzOutcome(arg byte) classify.Outcome {
	return []classify.Outcome{classify.Success, classify.Failure, classify.Ignore}[arg%3]
}

// errOf is an error that classify.Default classifies as o.
func errOf(o classify.Outcome) error {
	switch o {
	case classify.Success:
		return nil
	case classify.Ignore:
		return context.Canceled
	}
	return errBoom
}

// maxScriptOps bounds a script, so that one input stays quick.
const maxScriptOps = 300

// fuzzHeader is the configuration the first four bytes of an input select.
type fuzzHeader struct {
	strategy    breaker.Strategy
	model       func() modelStrategy
	recSel      byte
	maxRestarts int
	window      time.Duration
	slowStart   time.Duration
}

// scriptSlowStarts are the slow starts bits 3 and 4 of the first header
// byte pick: none (the seeds from before slow starts have them clear), one
// of two ticks, one of 15, one of 100 ticks of 20ms.
var scriptSlowStarts = []time.Duration{0, 20 * time.Millisecond, 150 * time.Millisecond, 2 * time.Second}

// The periods the scripted Recover hands out, in turn, from an offset the
// header picks: zero and negative ones included (a negative one counts as
// zero).
var (
	scriptOpen  = []time.Duration{10 * time.Millisecond, 25 * time.Millisecond, 0, time.Millisecond, -5 * time.Millisecond, 100 * time.Millisecond, 7 * time.Millisecond, 40 * time.Millisecond}
	scriptProbe = []time.Duration{5 * time.Millisecond, 50 * time.Millisecond, 0, time.Millisecond, 20 * time.Millisecond, -time.Millisecond}
	scriptRates = []float64{1, 0.5, 0.34, 0.25}
)

// scriptDuration is the n-th period (n Timeout calls since Init) of a
// scripted Recover with selector sel.
func scriptDuration(sel byte, n int, opening bool) time.Duration {
	if opening {
		return scriptOpen[(int(sel%8)+n)%len(scriptOpen)]
	}
	return scriptProbe[(int(sel>>3)+n)%len(scriptProbe)]
}

// decodeScript splits an input into its header and its operations.
func decodeScript(data []byte) (fuzzHeader, []fuzzOp) {
	var h [4]byte
	copy(h[:], data)
	var hd fuzzHeader
	if h[0]&1 == 0 {
		n := 1 + int(h[0]>>1)%4
		hd.strategy = breaker.Consecutive{Failures: n}
		hd.model = func() modelStrategy { return &modelConsecutive{limit: n} }
	} else {
		rate := scriptRates[int(h[0]>>1)%len(scriptRates)]
		window := 1 + int(h[1]%8)
		minCalls := int(h[1]>>3) % (window + 1)
		hd.strategy = breaker.FailureRate{Rate: rate, Window: window, MinCalls: minCalls}
		eff := minCalls
		if eff == 0 {
			eff = window
		}
		hd.model = func() modelStrategy { return &modelRate{rate: rate, window: window, minCalls: eff} }
	}
	hd.slowStart = scriptSlowStarts[h[0]>>3&3]
	hd.recSel = h[2]
	hd.maxRestarts = 2 + int(h[3]%4)
	hd.window = time.Duration(1+int(h[3]>>2)%8) * 50 * time.Millisecond

	var ops []fuzzOp
	if len(data) > 4 {
		body := data[4:]
		for i := 0; i+1 < len(body) && len(ops) < maxScriptOps; i += 2 {
			ops = append(ops, fuzzOp{kind: fuzzOpKind(body[i] % byte(numFuzzOps)), arg: body[i+1]})
		}
	}
	return hd, ops
}

// encodeScript is the inverse of decodeScript.
func encodeScript(header [4]byte, ops []fuzzOp) []byte {
	out := append([]byte(nil), header[:]...)
	for _, o := range ops {
		out = append(out, byte(o.kind), o.arg)
	}
	return out
}

// scriptedRecover hands out the periods of scriptDuration, records every
// Timeout call, and panics when told to.
type scriptedRecover struct {
	sel          byte
	panicTimeout atomic.Bool
	panicInit    atomic.Bool

	mu    sync.Mutex
	calls []recover.Context
	inits int
}

func (r *scriptedRecover) Init() (any, error) {
	r.mu.Lock()
	r.inits++
	r.mu.Unlock()
	if r.panicInit.Swap(false) {
		panic("scripted Init panic")
	}
	return 0, nil
}

func (r *scriptedRecover) Timeout(c recover.Context, state any) (time.Duration, any) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	if r.panicTimeout.Swap(false) {
		panic("scripted Timeout panic")
	}
	n := state.(int)
	return scriptDuration(r.sel, n, c.Transition.To == breaker.Open), n + 1
}

// take returns the Timeout calls since the last take, and the Init calls
// so far.
func (r *scriptedRecover) take() ([]recover.Context, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	calls := r.calls
	r.calls = nil
	return calls, r.inits
}

// scriptReport is what a played script went through.
type scriptReport struct {
	ops, checks  int
	edges        map[pathEdge]int
	halted       bool
	stale        uint64
	declined     uint64
	cancelled    int  // Acquires refused because their context was done
	initFailed   bool // a restart's Init panicked
	zeroTimer    bool // a timer fired in the step that armed it
	edgeEarly    bool // the clock stopped one nanosecond before a deadline
	doubleCount  bool // a permit was released twice
	slowDeclined int  // calls a slow start declined at random
	slowAdmitted int  // calls a slow start let through at random
}

// heldPermit is a permit held by the script: the real one and the model's.
type heldPermit struct {
	real  manager.Permit
	model modelPermit
}

var cancelledCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// runScript plays data against a real manager and the model, failing t at
// the first difference.
func runScript(t testing.TB, data []byte) scriptReport {
	hd, ops := decodeScript(data)
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, MaxRestarts: hd.maxRestarts, RestartWindow: hd.window})
	defer m.Stop()
	rec := &scriptedRecover{sel: hd.recSel}
	const name = "fuzzed"
	b, err := m.Register(name, manager.Config{Strategy: hd.strategy, Recover: rec, SlowStart: hd.slowStart})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	events, unsubscribe := m.Subscribe(4096)
	defer unsubscribe()
	mod := newRefModel(name, hd.model(), func(n int, opening bool) time.Duration {
		return scriptDuration(hd.recSel, n, opening)
	}, mock.Now(), hd.maxRestarts, hd.window)

	rep := scriptReport{edges: map[pathEdge]int{}}
	paths := newPathChecker()
	var held []heldPermit
	var trace strings.Builder
	mod.slow = hd.slowStart
	fmt.Fprintf(&trace, "strategy %#v, slow start %v, recover selector %d, restarts %d within %v\n", hd.strategy, hd.slowStart, hd.recSel, hd.maxRestarts, hd.window)
	fatalf := func(step int, format string, args ...any) {
		t.Helper()
		t.Fatalf("step %d (%v): %s\nscript so far:\n%s", step, ops[step], fmt.Sprintf(format, args...), trace.String())
	}

	for i, op := range ops {
		rep.ops++
		fmt.Fprintf(&trace, "  %3d %v\n", i, op)
		switch op.kind {
		case opAcquire, opAcquireCancelled:
			ctx := context.Background()
			if op.kind == opAcquireCancelled {
				ctx = cancelledCtx
			}
			p, err := b.Acquire(ctx)
			mp, moe, merr := mod.acquire(op.kind == opAcquireCancelled)
			if mod.either && err != nil {
				moe = mod.declineSlow() // the slow start's draw declined it
				rep.slowDeclined++
			}
			rep.checks++
			switch {
			case moe != nil:
				var oe *breaker.OpenError
				if !errors.As(err, &oe) || !errors.Is(err, breaker.ErrOpen) {
					fatalf(i, "Acquire returned %v, %v; want declined with %+v", p, err, *moe)
				}
				if *oe != *moe {
					fatalf(i, "declined with %+v, want %+v", *oe, *moe)
				}
			case merr != nil:
				if !errors.Is(err, merr) {
					fatalf(i, "Acquire returned %v; want %v", err, merr)
				}
				if errors.Is(merr, context.Canceled) {
					rep.cancelled++
				}
			default:
				if err != nil {
					fatalf(i, "Acquire returned %v; want a permit (probe %v)", err, mp.probe)
				}
				if p.Probe() != mp.probe {
					fatalf(i, "Acquire returned a permit with Probe() %v, want %v", p.Probe(), mp.probe)
				}
				if mod.either {
					rep.slowAdmitted++
				}
				if len(held) < 64 {
					held = append(held, heldPermit{p, mp})
				}
			}
		case opRelease, opReleaseKeep:
			if len(held) == 0 {
				continue
			}
			h := held[len(held)-1]
			o := fuzzOutcome(op.arg)
			if op.kind == opRelease {
				held = held[:len(held)-1]
			} else {
				rep.doubleCount = true
			}
			h.real.Release(errOf(o))
			mod.release(h.model, o, errOf(o))
		case opReleaseOldest:
			if len(held) == 0 {
				continue
			}
			h := held[0]
			held = held[1:]
			o := fuzzOutcome(op.arg)
			h.real.ReleaseOutcome(o)
			mod.release(h.model, o, nil)
		case opAdvance, opAdvanceEdge:
			d := time.Duration(op.arg) * time.Millisecond
			if op.kind == opAdvanceEdge && mod.timed && !mod.halted {
				off := time.Duration(int(op.arg%3) - 1)
				d = max(mod.deadline.Add(off).Sub(mod.now), 0)
				rep.edgeEarly = rep.edgeEarly || (off < 0 && d > 0)
			}
			if d > 0 {
				mock.Add(d)
			}
			mod.advance(d)
		case opForceOpen:
			err := b.ForceOpen()
			merr := mod.forceOpen()
			rep.checks++
			if !errors.Is(err, merr) || (merr == nil) != (err == nil) {
				fatalf(i, "ForceOpen returned %v, want %v", err, merr)
			}
		case opReset:
			err := b.Reset()
			merr := mod.reset()
			rep.checks++
			if !errors.Is(err, merr) || (merr == nil) != (err == nil) {
				fatalf(i, "Reset returned %v, want %v", err, merr)
			}
		case opPanicTimeout:
			rec.panicTimeout.Store(true)
			mod.panicTimeout = true
		case opPanicInit:
			rec.panicInit.Store(true)
			mod.panicInit = true
		}
		m.Sync()

		// The events and Recover calls of the step.
		wantEvs, wantTOs := mod.take()
		var gotEvs []modelEvent
		for _, e := range drain(events) {
			if e.Name != name {
				fatalf(i, "event of breaker %q", e.Name)
			}
			if err := paths.feed(e); err != nil {
				fatalf(i, "event path: %v", err)
			}
			gotEvs = append(gotEvs, modelEventOf(e))
		}
		rep.checks += 2
		if !reflect.DeepEqual(gotEvs, wantEvs) {
			fatalf(i, "events:\n got  %v\n want %v", gotEvs, wantEvs)
		}
		gotTOs, gotInits := rec.take()
		if !reflect.DeepEqual(gotTOs, wantTOs) {
			fatalf(i, "Recover.Timeout calls:\n got  %+v\n want %+v", gotTOs, wantTOs)
		}
		rep.checks++
		if gotInits != mod.inits {
			fatalf(i, "Recover.Init calls: got %d, want %d", gotInits, mod.inits)
		}
		for j := 1; j < len(wantEvs); j++ {
			if wantEvs[j].Cause == breaker.CauseTimer && wantEvs[j].At.Equal(wantEvs[j-1].At) {
				rep.zeroTimer = true
			}
		}

		// The breaker's state and counters.
		rep.checks += 3
		s := b.Snapshot()
		st := b.Stats()
		const format = "%v gen=%d since=%d until=%d forced=%v halted=%v slow start=%d..%d admitted=%v"
		var gotFrom, gotUntil time.Time
		if s.SlowStart != nil {
			gotFrom, gotUntil = s.SlowStart.From, s.SlowStart.Until
			if s.SlowStart.Share != st.Admitted {
				fatalf(i, "the snapshot's slow start admits %v, Stats.Admitted says %v", s.SlowStart.Share, st.Admitted)
			}
		}
		got := fmt.Sprintf(format, s.State, s.Gen, s.Since.UnixNano(), s.Until.UnixNano(), s.Forced, s.Halted,
			gotFrom.UnixNano(), gotUntil.UnixNano(), st.Admitted)
		slowFrom, slowUntil := mod.slowStart()
		want := fmt.Sprintf(format, mod.state, mod.gen, mod.since.UnixNano(), mod.until.UnixNano(), mod.forced, mod.halted,
			slowFrom.UnixNano(), slowUntil.UnixNano(), mod.admitted())
		if got != want {
			fatalf(i, "snapshot:\n got  %s\n want %s", got, want)
		}
		gotStats := modelStats{st.Successes, st.Failures, st.Ignored, st.Declined, st.Stale}
		if gotStats != mod.stats || st.DroppedEvents != 0 || st.Calls != st.Successes+st.Failures+st.Ignored+st.Declined {
			fatalf(i, "stats:\n got  %+v\n want %+v", st, mod.stats)
		}
		select {
		case <-m.Done():
			if !mod.halted {
				fatalf(i, "the manager stopped; the model did not")
			}
		default:
			if mod.halted {
				fatalf(i, "the model stopped after %d restarts within %v; the manager did not", hd.maxRestarts, hd.window)
			}
		}
	}
	rep.edges = paths.edges
	rep.halted = mod.halted
	rep.stale = mod.stats.Stale
	rep.declined = mod.stats.Declined
	rep.initFailed = mod.initFailures > 0
	fuzzTally(rep)
	return rep
}

// fuzzTotals count every script played by this process. When
// FUSEBOX_FUZZ_TALLY names a directory, each process writes its totals
// there (one file per process), so that a fuzzing run's figures can be
// summed by scripts/long-tests.sh.
var fuzzTotals struct {
	mu                      sync.Mutex
	scripts, ops, checks    int64
	halted, restartsScripts int64
}

func fuzzTally(rep scriptReport) {
	dir := os.Getenv("FUSEBOX_FUZZ_TALLY")
	if dir == "" {
		return
	}
	fuzzTotals.mu.Lock()
	defer fuzzTotals.mu.Unlock()
	fuzzTotals.scripts++
	fuzzTotals.ops += int64(rep.ops)
	fuzzTotals.checks += int64(rep.checks)
	if rep.halted {
		fuzzTotals.halted++
	}
	if rep.edges[pathEdge{breaker.Open, breaker.Closed, breaker.CauseRestart}]+rep.edges[pathEdge{breaker.Probing, breaker.Closed, breaker.CauseRestart}] > 0 {
		fuzzTotals.restartsScripts++
	}
	body := fmt.Sprintf("scripts %d\nops %d\nchecks %d\nhalted %d\nrestarted %d\n",
		fuzzTotals.scripts, fuzzTotals.ops, fuzzTotals.checks, fuzzTotals.halted, fuzzTotals.restartsScripts)
	path := filepath.Join(dir, fmt.Sprintf("tally-%d", os.Getpid()))
	if err := os.WriteFile(path+".tmp", []byte(body), 0o644); err == nil {
		_ = os.Rename(path+".tmp", path)
	}
}

// updateSeeds rewrites the seed corpus of FuzzBreakerModel from fuzzSeeds:
//
//	go test ./manager -run TestFuzzSeedCorpus -fusebox.update-seeds
var updateSeeds = flag.Bool("fusebox.update-seeds", false, "rewrite testdata/fuzz/FuzzBreakerModel from the seed scripts")

// seedDir is where go test finds the seed corpus of FuzzBreakerModel.
var seedDir = filepath.Join("testdata", "fuzz", "FuzzBreakerModel")

// Header bytes of the seed scripts.
func consHeader(failures int, recSel, sup byte) [4]byte {
	return [4]byte{byte(failures-1) << 1, 0, recSel, sup}
}

func rateHeader(rateIdx, window, minCalls int, recSel, sup byte) [4]byte {
	return [4]byte{1 | byte(rateIdx)<<1, byte(window-1) | byte(minCalls)<<3, recSel, sup}
}

// slowHeader is h with the slow start scriptSlowStarts[sel].
func slowHeader(h [4]byte, sel byte) [4]byte {
	h[0] |= sel << 3
	return h
}

// Shorthands for the seed scripts.
var (
	sAcquire   = fuzzOp{kind: opAcquire}
	sCancelled = fuzzOp{kind: opAcquireCancelled}
	sForce     = fuzzOp{kind: opForceOpen}
	sReset     = fuzzOp{kind: opReset}
	sPanic     = fuzzOp{kind: opPanicTimeout}
	sPanicInit = fuzzOp{kind: opPanicInit}
	sEdge      = fuzzOp{kind: opAdvanceEdge, arg: 1} // exactly at the deadline
	sEdgeEarly = fuzzOp{kind: opAdvanceEdge, arg: 0} // one nanosecond before
	sEdgeLate  = fuzzOp{kind: opAdvanceEdge, arg: 2} // one nanosecond after
)

func sRelease(o byte) fuzzOp        { return fuzzOp{kind: opRelease, arg: o} }
func sReleaseOld(o byte) fuzzOp     { return fuzzOp{kind: opReleaseOldest, arg: o} }
func sReleaseKeep(o byte) fuzzOp    { return fuzzOp{kind: opReleaseKeep, arg: o} }
func sAdvance(ms byte) fuzzOp       { return fuzzOp{kind: opAdvance, arg: ms} }
func ops(list ...[]fuzzOp) []fuzzOp { return concatOps(list...) }

func concatOps(list ...[]fuzzOp) []fuzzOp {
	var out []fuzzOp
	for _, l := range list {
		out = append(out, l...)
	}
	return out
}

// Arguments of the release operations.
const (
	oSuccess byte = 0
	oFailure byte = 1
	oIgnore  byte = 2
)

// sTrip trips a closed breaker of Consecutive{Failures: n}.
func sTrip(n int) []fuzzOp {
	var out []fuzzOp
	for range n {
		out = append(out, sAcquire, sRelease(oFailure))
	}
	return out
}

// fuzzSeeds are the seed scripts: together they take every edge of the
// state graph a single breaker can take, and the situations around them.
func fuzzSeeds() []scriptSeed[fuzzOp] {
	seeds := []scriptSeed[fuzzOp]{
		{
			// The whole cycle, with zero and negative periods from the
			// scripted Recover along the way, and the timer edges.
			name:   "cycle",
			header: consHeader(1, 0, 3),
			ops: ops(
				sTrip(1), // open for 10ms
				[]fuzzOp{sAcquire, sEdgeEarly, sAcquire, sEdge},  // half_open exactly at 10ms
				[]fuzzOp{sAcquire, sAcquire, sRelease(oSuccess)}, // probe (50ms), declined, closed
				sTrip(1),                                          // open for 0: half_open at once
				[]fuzzOp{sAcquire, sRelease(oFailure)},            // probe (1ms) fails: open for -5ms, half_open at once
				[]fuzzOp{sAcquire, sRelease(oSuccess)},            // probe time -1ms: forgotten at once, stale
				[]fuzzOp{sAcquire, sRelease(oIgnore)},             // probe (5ms) ignored: half_open
				[]fuzzOp{sAcquire, sEdgeLate, sRelease(oFailure)}, // probe (50ms) runs out; its failure is stale
				[]fuzzOp{sAcquire, sRelease(oSuccess)},
			),
		},
		{
			name:   "force-and-reset",
			header: consHeader(2, 5, 3),
			ops: ops(
				[]fuzzOp{sForce, sAcquire, sAdvance(255), sForce, sReset}, // closed->open forced, held past any timer
				sTrip(2), []fuzzOp{sForce, sEdge, sReset}, // open->open forced; its old timer does nothing
				sTrip(2), []fuzzOp{sEdge, sForce, sReset}, // half_open->open
				sTrip(2), []fuzzOp{sEdge, sReset}, // half_open->closed
				sTrip(2), []fuzzOp{sEdge, sAcquire, sForce, sRelease(oSuccess), sReset}, // probing->open; the probe is stale
				sTrip(2), []fuzzOp{sEdge, sAcquire, sReset, sRelease(oFailure)}, // probing->closed
				sTrip(2), []fuzzOp{sReset}, // open->closed
				// Reset on a closed breaker clears the run of failures.
				[]fuzzOp{sAcquire, sRelease(oFailure), sReset, sAcquire, sRelease(oFailure), sAcquire, sRelease(oFailure)},
			),
		},
		{
			name:   "restarts",
			header: consHeader(1, 0, 2),
			ops: ops(
				[]fuzzOp{sPanic}, sTrip(1), // the trip's Timeout panics: open->closed (restart)
				sTrip(1), []fuzzOp{sEdge, sPanic, sAcquire, sRelease(oSuccess)}, // probing->closed; the probe is stale
				[]fuzzOp{sAdvance(200)},
				sTrip(1), []fuzzOp{sEdge, sAcquire, sPanic, sRelease(oFailure)}, // the failed probe's Timeout panics
				[]fuzzOp{sAdvance(200), sPanicInit, sPanic}, sTrip(1), // Init fails on the restart: its state is kept
				[]fuzzOp{sAdvance(200)}, sTrip(1), []fuzzOp{sEdge, sAcquire, sRelease(oSuccess)},
			),
		},
		{
			name:   "restart-limit",
			header: consHeader(1, 0, 0), // 2 restarts within 50ms stop the manager
			ops: ops(
				[]fuzzOp{sPanic}, sTrip(1), []fuzzOp{sAdvance(10), sAcquire, sAcquire, sPanic, sRelease(oFailure)},
				[]fuzzOp{sAcquire, sCancelled, sReleaseOld(oFailure), sForce, sReset, sAdvance(100), sAcquire},
			),
		},
		{
			name:   "restart-window",
			header: consHeader(1, 0, 0),
			ops: ops(
				[]fuzzOp{sPanic}, sTrip(1), []fuzzOp{sAdvance(50)}, // the next panic is 50ms later: outside the window
				[]fuzzOp{sPanic}, sTrip(1), []fuzzOp{sAdvance(49)}, // this one is inside it: the manager stops
				[]fuzzOp{sPanic}, sTrip(1), []fuzzOp{sAcquire},
			),
		},
		{
			name:   "failure-rate",
			header: rateHeader(1, 4, 2, 0, 3), // Rate 0.5 over the last 4 calls, at least 2
			ops: ops(
				[]fuzzOp{sAcquire, sRelease(oSuccess), sAcquire, sRelease(oIgnore), sAcquire, sRelease(oFailure)},
				[]fuzzOp{sEdge, sAcquire, sRelease(oSuccess)},
				[]fuzzOp{sAcquire, sRelease(oFailure), sAcquire, sRelease(oSuccess), sAcquire, sRelease(oSuccess)},
				[]fuzzOp{sAcquire, sRelease(oSuccess), sAcquire, sRelease(oFailure), sAcquire, sRelease(oFailure)},
			),
		},
		{
			name:   "failure-rate-one",
			header: rateHeader(0, 1, 0, 2, 3), // every failure trips; open for 0
			ops:    ops(sTrip(1), []fuzzOp{sAcquire, sRelease(oFailure), sAcquire, sRelease(oIgnore), sAcquire, sRelease(oSuccess)}),
		},
		{
			// A success ends a run of failures; an ignored call does not.
			name:   "consecutive-run",
			header: consHeader(2, 3, 3),
			ops: ops(
				[]fuzzOp{sAcquire, sRelease(oFailure), sAcquire, sRelease(oSuccess), sAcquire, sRelease(oFailure)},
				[]fuzzOp{sAcquire, sRelease(oIgnore), sAcquire, sRelease(oFailure)},
			),
		},
		{
			name:   "stale-and-double",
			header: consHeader(2, 1, 3),
			ops: ops(
				[]fuzzOp{sAcquire, sAcquire, sAcquire, sRelease(oFailure), sReleaseKeep(oFailure)}, // one permit counted twice trips
				[]fuzzOp{sRelease(oFailure), sReleaseOld(oSuccess)},                                // both stale
				[]fuzzOp{sEdge, sAcquire, sReleaseKeep(oIgnore), sRelease(oSuccess)},               // the probe's second release is stale
				[]fuzzOp{sAcquire, sRelease(oSuccess)},
			),
		},
		{
			name:   "cancelled-context",
			header: consHeader(1, 0, 3),
			ops: ops(
				[]fuzzOp{sCancelled, sRelease(oFailure)}, // a closed breaker does not look at the context
				[]fuzzOp{sCancelled, sEdge, sCancelled, sAcquire, sCancelled, sRelease(oSuccess)},
			),
		},
	}
	seeds = append(seeds, scriptSeed[fuzzOp]{
		// A recovery starts a slow start of 150ms (ticks of 10ms): it
		// declines every call at the closing, some later; a trip,
		// Reset and a restart end it, and so does its end.
		name:   "slow-start",
		header: slowHeader(consHeader(2, 0, 3), 2),
		ops: ops(
			sTrip(2), []fuzzOp{sEdge, sAcquire, sRelease(oSuccess)}, // a recovery
			[]fuzzOp{sAcquire, sAcquire, sAdvance(9), sAcquire, sAdvance(1)}, // nothing goes through before the first tick
			[]fuzzOp{sAcquire, sAcquire, sAcquire, sAcquire, sAdvance(60)},
			[]fuzzOp{sAcquire, sAcquire, sAcquire, sAcquire, sAcquire, sAcquire, sAcquire, sAcquire},
			[]fuzzOp{sRelease(oFailure), sRelease(oFailure), sRelease(oFailure)}, // trips if two went through
			[]fuzzOp{sReset, sAcquire, sRelease(oSuccess)},
			sTrip(2), []fuzzOp{sEdge, sAcquire, sRelease(oSuccess), sAdvance(100)}, // another recovery
			[]fuzzOp{sAcquire, sAcquire, sAcquire, sAcquire, sReset, sAcquire}, // Reset ends it
			sTrip(2), []fuzzOp{sEdge, sAcquire, sRelease(oSuccess), sAdvance(30)},
			[]fuzzOp{sPanic, sAcquire, sAcquire, sAcquire, sAcquire}, // a panic...
			sTrip(2), []fuzzOp{sAcquire}, // ...restarts it: the trip's Timeout panics, closed at full rate
			sTrip(2), []fuzzOp{sEdge, sAcquire, sRelease(oSuccess), sAdvance(149), sAcquire, sEdgeLate, sAdvance(1), sAcquire},
		),
	})
	// Longer scripts drawn at random, with a fixed seed.
	for i, h := range [][4]byte{consHeader(3, 9, 7), rateHeader(2, 6, 3, 20, 13), consHeader(1, 42, 1), slowHeader(consHeader(2, 9, 7), 2), slowHeader(rateHeader(1, 4, 2, 3, 7), 3)} {
		r := rand.New(rand.NewPCG(uint64(i), 2026))
		var ops []fuzzOp
		for range 250 {
			ops = append(ops, fuzzOp{kind: fuzzOpKind(r.IntN(int(numFuzzOps))), arg: byte(r.IntN(40))})
		}
		seeds = append(seeds, scriptSeed[fuzzOp]{name: fmt.Sprintf("random-%d", i), header: h, ops: ops})
	}
	return seeds
}

// The seed corpus in testdata/fuzz/FuzzBreakerModel is the seed scripts
// (rewrite it with -fusebox.update-seeds), and, played against the model,
// takes every edge of the state graph one breaker can take, along with
// the situations around them: stale and double releases, declined calls,
// cancelled contexts, timers of zero, deadlines approached from one
// nanosecond before, a restart whose Init fails, the restart limit.
func TestFuzzSeedCorpus(t *testing.T) {
	files := seedCorpus(t, seedDir, encodeSeeds(fuzzSeeds(), encodeScript), *updateSeeds, "update-seeds")
	edges := map[pathEdge]int{}
	var all scriptReport
	for _, f := range files {
		var rep scriptReport
		t.Run(f.name, func(t *testing.T) { rep = runScript(t, f.data) })
		for e, n := range rep.edges {
			edges[e] += n
		}
		all.ops += rep.ops
		all.checks += rep.checks
		all.halted = all.halted || rep.halted
		all.stale += rep.stale
		all.declined += rep.declined
		all.cancelled += rep.cancelled
		all.initFailed = all.initFailed || rep.initFailed
		all.zeroTimer = all.zeroTimer || rep.zeroTimer
		all.edgeEarly = all.edgeEarly || rep.edgeEarly
		all.doubleCount = all.doubleCount || rep.doubleCount
		all.slowDeclined += rep.slowDeclined
		all.slowAdmitted += rep.slowAdmitted
	}

	C, O, H, P := breaker.Closed, breaker.Open, breaker.HalfOpen, breaker.Probing
	want := []pathEdge{
		{C, O, breaker.CauseTrip},
		{O, H, breaker.CauseTimer},
		{H, P, breaker.CauseProbe},
		{P, C, breaker.CauseProbe},
		{P, O, breaker.CauseProbe},
		{P, H, breaker.CauseProbe},
		{P, H, breaker.CauseTimer},
		{C, O, breaker.CauseForceOpen},
		{O, O, breaker.CauseForceOpen},
		{H, O, breaker.CauseForceOpen},
		{P, O, breaker.CauseForceOpen},
		{O, C, breaker.CauseReset},
		{H, C, breaker.CauseReset},
		{P, C, breaker.CauseReset},
		{O, C, breaker.CauseRestart},
		{P, C, breaker.CauseRestart},
	}
	taken := edgesTaken(t, edges, want)
	t.Logf("%d seeds, %d operations, %d checks; edges taken:\n%s", len(files), all.ops, all.checks, taken)

	assert.True(t, all.halted, "a seed reaches the restart limit")
	assert.Positive(t, all.stale, "a seed makes stale releases")
	assert.Positive(t, all.declined, "a seed has declined calls")
	assert.Positive(t, all.cancelled, "a seed asks for the probe with a done context")
	assert.True(t, all.initFailed, "a seed has a restart whose Init fails")
	assert.True(t, all.zeroTimer, "a seed has a timer of zero")
	assert.True(t, all.edgeEarly, "a seed stops the clock one nanosecond before a deadline")
	assert.True(t, all.doubleCount, "a seed releases a permit twice")
	assert.Positive(t, all.slowDeclined, "a slow start declines calls at random")
	assert.Positive(t, all.slowAdmitted, "a slow start lets calls through at random")
}

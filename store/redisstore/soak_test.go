package redisstore_test

// The fleet soak: managers in this process and in child processes (this
// test binary run again, see soakMemberMain) share breakers through a real
// redis-server, each behind a loopback proxy of its own (faultProxy), call
// a service that fails in phases, and live through faults a seeded
// scheduler injects at random: latency and resets on one link,
// partitions, Redis paused, killed and restarted empty, FLUSHALL, the
// watch connections killed, managers stopped and new ones registered,
// forcings and resets, a threshold reconfigured. Invariants are checked
// as it runs (see soak.violate for the list); each failure is printed
// with the seed and the last events of every manager.
//
//	FUSEBOX_SOAK_FLEET=1 go test -race -run '^TestFleetSoak$' ./store/redisstore
//	FUSEBOX_SOAK_FLEET=1 FUSEBOX_SOAK=10m FUSEBOX_SOAK_SEED=42 go test -run '^TestFleetSoak$' -timeout 30m ./store/redisstore
//
// The seed fixes the schedule of faults and of the service's phases (what
// happens, to whom, and when); the timing of the managers is the
// machine's.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

const (
	soakEnv       = "FUSEBOX_SOAK_FLEET" // runs the soak (a duration sets its length)
	soakLengthEnv = "FUSEBOX_SOAK"       // its length: a Go duration ("long": 10m)
	soakSeedEnv   = "FUSEBOX_SOAK_SEED"  // replays a schedule
	soakMemberEnv = "FUSEBOX_SOAK_MEMBER"
	soakTraceEnv  = "FUSEBOX_SOAK_TRACE" // a file to write every record to

	soakStoreTimeout = 250 * time.Millisecond
	soakResync       = 200 * time.Millisecond
	// soakCallMargin is what a call may take beyond StoreTimeout: the
	// scheduling of a loaded machine under the race detector.
	soakCallMargin = 750 * time.Millisecond
	// soakStopWithin bounds a manager's Stop, whatever the faults.
	soakStopWithin = 2 * time.Second
)

// soakBreaker is one of the breakers every member registers.
type soakBreaker struct {
	name     string
	failures int // the threshold of a consecutive strategy; 0 for the window
	open     time.Duration
	probe    time.Duration // ProbeTimeout
	quorum   int
	fallback store.Fallback
	// slowStart is Config.SlowStart: after a recovery the fleet's
	// traffic comes back over it.
	slowStart time.Duration
}

var soakBreakers = []soakBreaker{
	{name: "cons", failures: 5, open: 300 * time.Millisecond, probe: time.Second, fallback: store.FallbackLocal},
	{name: "window", open: 300 * time.Millisecond, probe: time.Second, fallback: store.FailOpen},
	{name: "quorum", failures: 5, open: 400 * time.Millisecond, probe: time.Second, quorum: 2, fallback: store.FallbackLocal},
	{name: "closed", failures: 3, open: 200 * time.Millisecond, probe: time.Second, fallback: store.FailClosed},
	{name: "slow", failures: 4, open: 250 * time.Millisecond, probe: time.Second, fallback: store.FallbackLocal, slowStart: time.Second},
}

func (sb soakBreaker) config(st store.Store, failures int) manager.Config {
	cfg := manager.Config{
		Recover:   recover.BasicTimeout{Open: sb.open, ProbeTimeout: sb.probe},
		Store:     st,
		Fallback:  sb.fallback,
		Quorum:    sb.quorum,
		SlowStart: sb.slowStart,
	}
	if sb.failures == 0 {
		cfg.Strategy = breaker.TimeWindow{Rate: 0.5, Period: time.Second, Buckets: 10, MinCalls: 10}
	} else {
		cfg.Strategy = breaker.Consecutive{Failures: failures}
	}
	return cfg
}

func soakBreakerNamed(name string) (soakBreaker, bool) {
	for _, sb := range soakBreakers {
		if sb.name == name {
			return sb, true
		}
	}
	return soakBreaker{}, false
}

// soakRecord is what a member reports, one JSON object a line from a
// child process.
type soakRecord struct {
	T       string        `json:"t"` // ev, slow, downadmit, stats, stopped, leak, error
	Breaker string        `json:"b,omitempty"`
	Kind    string        `json:"k,omitempty"`
	From    string        `json:"from,omitempty"`
	To      string        `json:"to,omitempty"`
	Cause   string        `json:"cause,omitempty"`
	Gen     uint64        `json:"gen,omitempty"`
	Missed  uint64        `json:"missed,omitempty"`
	Op      string        `json:"op,omitempty"`
	D       time.Duration `json:"d,omitempty"`
	N       uint64        `json:"n,omitempty"`
	Calls   uint64        `json:"calls,omitempty"`
	Msg     string        `json:"msg,omitempty"`
}

// soakMemberConfig is what the soak tells a member.
type soakMemberConfig struct {
	ID      int    `json:"id"`
	Redis   string `json:"redis"` // its proxy
	Service string `json:"service"`
}

// soakMemberMain runs a member as a child process: commands on stdin,
// records on stdout. It checks that no goroutine is left once its
// manager stopped and its clients closed.
func soakMemberMain() int {
	var cfg soakMemberConfig
	if err := json.Unmarshal([]byte(os.Getenv(soakMemberEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "soak member:", err)
		return 2
	}
	before := goleak.IgnoreCurrent() // the goroutines of the test binary itself
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	emit := func(r soakRecord) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(r)
	}
	cmds := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			cmds <- sc.Text()
			if sc.Text() == "stop" {
				return
			}
		}
		cmds <- "stop" // the parent is gone
	}()
	runSoakMember(cfg, cmds, emit)
	if err := goleak.Find(before); err != nil {
		emit(soakRecord{T: "leak", Msg: err.Error()})
	}
	emit(soakRecord{T: "exit"})
	return 0
}

// runSoakMember runs one manager with every soak breaker on the Redis
// behind cfg.Redis, and a caller per breaker, until it is told to stop.
// It reports every event of the manager, every call slower than
// StoreTimeout plus the margin, every call a FailClosed breaker admitted
// while it said StoreDown before and after Acquire, and, as it stops, how
// long Stop took and its counters.
func runSoakMember(cfg soakMemberConfig, cmds <-chan string, emit func(soakRecord)) {
	limit := soakStoreTimeout + soakCallMargin
	client := redis.NewClient(&redis.Options{Addr: cfg.Redis, ContextTimeoutEnabled: true})
	st := redisstore.New(client, redisstore.Options{})
	m := manager.Start(manager.Options{Name: fmt.Sprintf("member-%d", cfg.ID), StoreTimeout: soakStoreTimeout, Resync: soakResync, Logger: quiet})
	events, unsubscribe := m.Subscribe(1 << 16)
	evDone := make(chan struct{})
	go func() {
		defer close(evDone)
		for ev := range events {
			r := soakRecord{T: "ev", Breaker: ev.Name, Kind: ev.Kind.String(), Gen: ev.Gen, Missed: ev.Missed}
			if ev.Kind == manager.EventTransition {
				r.From, r.To, r.Cause = ev.Transition.From.String(), ev.Transition.To.String(), ev.Cause.String()
			}
			emit(r)
		}
	}()
	breakers := map[string]*manager.Breaker{}
	for _, sb := range soakBreakers {
		b, err := m.Register(sb.name, sb.config(st, sb.failures))
		if err != nil {
			emit(soakRecord{T: "error", Breaker: sb.name, Msg: "Register: " + err.Error()})
			continue
		}
		breakers[sb.name] = b
	}
	stalls := &stallMeter{}
	stallCtx, stallStop := context.WithCancel(context.Background())
	stallDone := make(chan struct{})
	go func() { defer close(stallDone); stalls.run(stallCtx) }()
	defer func() { stallStop(); <-stallDone }()
	// slow reports a call that took longer than the limit, unless the
	// process did not run for long enough meanwhile to explain it.
	slow := func(name, op string, t0 time.Time, took time.Duration) {
		if took <= limit {
			return
		}
		stall := stalls.during(t0, t0.Add(took))
		kind := "slow"
		if took-stall <= limit {
			kind = "stalled"
		}
		emit(soakRecord{T: kind, Breaker: name, Op: op, D: took, N: uint64(stall)})
	}
	httpc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, sb := range soakBreakers {
		b := breakers[sb.name]
		if b == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				before := b.Stats().StoreDown
				t0 := time.Now()
				p, err := b.Acquire(ctx)
				took := time.Since(t0)
				after := b.Stats().StoreDown
				slow(sb.name, "Acquire", t0, took)
				if err != nil {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				if sb.fallback == store.FailClosed && before && after {
					emit(soakRecord{T: "downadmit", Breaker: sb.name, Msg: fmt.Sprintf("probe=%v gen=%d", p.Probe(), b.Snapshot().Gen)})
				}
				callErr := soakCall(httpc, cfg, sb.name, p.Probe(), before || after)
				t1 := time.Now()
				p.Release(callErr)
				slow(sb.name, "Release", t1, time.Since(t1))
				time.Sleep(time.Millisecond)
			}
		}()
	}
	for cmd := range cmds {
		f := strings.Fields(cmd)
		if len(f) == 0 {
			continue
		}
		if f[0] == "stop" {
			break
		}
		b := breakers[f[len(f)-1]]
		if len(f) == 3 {
			b = breakers[f[1]]
		}
		if b == nil {
			emit(soakRecord{T: "error", Msg: "unknown command " + cmd})
			continue
		}
		var err error
		switch f[0] {
		case "force":
			err = b.ForceOpen()
		case "reset":
			err = b.Reset()
		case "reconf":
			sb, _ := soakBreakerNamed(f[1])
			n, _ := strconv.Atoi(f[2])
			err = b.Reconfigure(sb.config(st, n))
		}
		if err != nil && !errors.Is(err, manager.ErrStopped) {
			emit(soakRecord{T: "error", Breaker: b.Name(), Msg: cmd + ": " + err.Error()})
		}
	}
	cancel()
	wg.Wait()
	for name, b := range breakers {
		s := b.Stats()
		emit(soakRecord{T: "stats", Breaker: name, N: s.StoreErrors, Calls: s.Successes + s.Failures})
	}
	stalls.mu.Lock()
	emit(soakRecord{T: "stall", D: stalls.pause})
	stalls.mu.Unlock()
	t0 := time.Now()
	m.Stop()
	emit(soakRecord{T: "stopped", D: time.Since(t0)})
	unsubscribe()
	<-evDone
	client.Close()
	httpc.CloseIdleConnections()
}

// stallMeter notes when its process did not run: a ticker of 5ms that
// fires late by more than 20ms is a stall (the race detector's and a loaded
// machine's pauses), which no breaker can be blamed for.
type stallMeter struct {
	mu    sync.Mutex
	gaps  [][2]time.Time // from, to
	pause time.Duration  // the longest
}

func (m *stallMeter) run(ctx context.Context) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			now := time.Now()
			if gap := now.Sub(last); gap > 25*time.Millisecond {
				m.mu.Lock()
				m.gaps = append(m.gaps, [2]time.Time{last.Add(5 * time.Millisecond), now})
				if len(m.gaps) > 256 {
					m.gaps = m.gaps[1:]
				}
				m.pause = max(m.pause, gap)
				m.mu.Unlock()
			}
			last = now
		}
	}
}

// during returns how long the process stalled between from and to.
func (m *stallMeter) during(from, to time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var d time.Duration
	for _, g := range m.gaps {
		lo, hi := g[0], g[1]
		if lo.Before(from) {
			lo = from
		}
		if hi.After(to) {
			hi = to
		}
		if hi.After(lo) {
			d += hi.Sub(lo)
		}
	}
	return d
}

// soakCall calls the service for breaker name: it says whether the call is
// a trial, and whether its manager said StoreDown around its Acquire.
func soakCall(c *http.Client, cfg soakMemberConfig, name string, probe, down bool) error {
	req, err := http.NewRequest(http.MethodGet, cfg.Service, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Breaker", name)
	req.Header.Set("X-Member", strconv.Itoa(cfg.ID))
	req.Header.Set("X-Probe", strconv.FormatBool(probe))
	req.Header.Set("X-Down", strconv.FormatBool(down))
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// soakMember is the soak's handle on a member.
type soakMember struct {
	id    int
	child bool
	proxy *faultProxy
	cmds  chan string    // in-process
	stdin io.WriteCloser // child
	cmd   *exec.Cmd
	done  chan struct{} // its records all handled
}

func (mb *soakMember) send(cmd string) {
	if mb.child {
		_, _ = io.WriteString(mb.stdin, cmd+"\n")
		return
	}
	select {
	case mb.cmds <- cmd:
	case <-mb.done:
	}
}

// memberView is what the soak knows of a member from its records.
type memberView struct {
	alive   bool
	last    []string // its last events
	state   map[string]string
	gen     map[string]uint64
	down    map[string]bool
	lost    bool   // it said store_lost at least once
	errs    uint64 // store errors it counted
	stopped bool
}

// soak is one run.
type soak struct {
	t       *testing.T
	seed    uint64
	srv     *redistest.Server
	admin   *redis.Client
	adminSt *redisstore.Store
	svc     *httptest.Server
	exe     string

	failing []atomic.Bool // by breaker index (soakBreakers): the service fails its calls

	mu         sync.Mutex
	members    map[int]*soakMember
	views      map[int]*memberView
	nextID     int
	faults     map[string]int
	violations map[string]int
	dumped     map[string]bool
	edges      map[string]int
	trialsIn   map[string]map[int]int // trials in flight at the service, by breaker, by member
	trials     int
	trialsDown int
	changes    map[string]int
	calls      uint64
	storeErrs  uint64
	slowest    time.Duration // the slowest call
	stalled    int           // calls over the limit that their process's stalls explain
	pause      time.Duration // the longest stall of a member
	slowStop   time.Duration
	converge   time.Duration
	maxLease   time.Duration
	recent     []string // the soak's own last actions
	trace      *os.File
}

// TestFleetSoak runs the fleet soak: skipped unless FUSEBOX_SOAK_FLEET is
// set. See the top of this file.
func TestFleetSoak(t *testing.T) {
	gate := os.Getenv(soakEnv)
	if gate == "" || gate == "0" {
		t.Skipf("the fleet soak runs with %s=1 (%s=60s or 10m sets its length, %s=n replays a seed)", soakEnv, soakLengthEnv, soakSeedEnv)
	}
	length := time.Minute
	for _, v := range []string{os.Getenv(soakLengthEnv), gate} {
		if v == "long" {
			length = 10 * time.Minute
		} else if d, err := time.ParseDuration(v); err == nil && d > 0 {
			length = d
		}
	}
	seed := uint64(time.Now().UnixNano() % 1_000_000)
	if v := os.Getenv(soakSeedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: not a number", soakSeedEnv, v)
		}
		seed = n
	}
	runSoak(t, seed, length, 6, 3)
}

func runSoak(t *testing.T, seed uint64, length time.Duration, inProcess, children int) {
	t.Logf("fleet soak: seed %d (replay: %s=1 %s=%d %s=%v), %d managers in this process, %d in child processes", seed, soakEnv, soakSeedEnv, seed, soakLengthEnv, length, inProcess, children)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := &soak{
		t: t, seed: seed, exe: exe,
		srv:        redistest.Start(t),
		members:    map[int]*soakMember{},
		views:      map[int]*memberView{},
		faults:     map[string]int{},
		violations: map[string]int{},
		failing:    make([]atomic.Bool, len(soakBreakers)),
		dumped:     map[string]bool{},
		edges:      map[string]int{},
		trialsIn:   map[string]map[int]int{},
		changes:    map[string]int{},
	}
	if path := os.Getenv(soakTraceEnv); path != "" {
		if s.trace, err = os.Create(path); err != nil {
			t.Fatal(err)
		}
		defer s.trace.Close()
	}
	s.admin = redis.NewClient(&redis.Options{Addr: s.srv.Addr(), ContextTimeoutEnabled: true})
	defer s.admin.Close()
	s.adminSt = redisstore.New(s.admin, redisstore.Options{})
	s.svc = httptest.NewServer(http.HandlerFunc(s.serve))
	defer s.svc.Close()

	ctx, cancel := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); s.observe(ctx) }()
	go func() { defer bg.Done(); s.sample(ctx) }()

	for i := range inProcess + children {
		s.startMember(i >= inProcess)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	phases := rand.New(rand.NewPCG(seed, 0xfa11))
	var faults sync.WaitGroup
	end := time.Now().Add(length)
	nextPhase := time.Now()
	for time.Now().Before(end) {
		if time.Now().After(nextPhase) {
			i := phases.IntN(len(soakBreakers))
			s.failing[i].Store(!s.failing[i].Load())
			nextPhase = time.Now().Add(time.Duration(300+phases.IntN(2500)) * time.Millisecond)
		}
		s.inject(rng, &faults)
		time.Sleep(time.Duration(100+rng.IntN(900)) * time.Millisecond)
	}
	faults.Wait()
	s.quiesce()
	for _, mb := range s.live() {
		s.stopMember(mb)
	}
	cancel()
	bg.Wait()
	s.report()
}

// inject starts one fault at random; a fault that lasts runs on its own
// goroutine, so that faults overlap.
func (s *soak) inject(rng *rand.Rand, wg *sync.WaitGroup) {
	members := s.live()
	if len(members) == 0 {
		return // every member is being replaced
	}
	mb := members[rng.IntN(len(members))]
	name := soakBreakers[rng.IntN(len(soakBreakers))].name
	hold := time.Duration(200+rng.IntN(2300)) * time.Millisecond
	kinds := []string{"latency", "reset", "partition", "partition-many", "pause", "kill", "flushall", "client-kill", "replace", "force-reset", "reconfigure"}
	kind := kinds[rng.IntN(len(kinds))]
	s.mu.Lock()
	s.faults[kind]++
	s.note(fmt.Sprintf("fault %s on m%d/%s for %v", kind, mb.id, name, hold))
	s.mu.Unlock()
	delay := time.Duration(50+rng.IntN(350)) * time.Millisecond
	var several []*soakMember
	for _, o := range members {
		if rng.IntN(3) == 0 {
			several = append(several, o)
		}
	}
	byCLI := rng.IntN(2) == 0
	threshold := 4 + rng.IntN(4)
	wg.Add(1)
	go func() {
		defer wg.Done()
		switch kind {
		case "latency":
			mb.proxy.setDelay(delay)
			time.Sleep(hold)
			mb.proxy.setDelay(0)
		case "reset":
			mb.proxy.reset()
		case "partition":
			mb.proxy.blackhole()
			mb.proxy.reset()
			time.Sleep(hold)
			mb.proxy.heal()
		case "partition-many":
			for _, o := range several {
				o.proxy.blackhole()
			}
			time.Sleep(hold)
			for _, o := range several {
				o.proxy.heal()
			}
		case "pause":
			s.redisFault(func() {
				s.srv.Pause()
				time.Sleep(hold / 2)
				s.srv.Resume()
			})
		case "kill":
			s.redisFault(func() {
				s.srv.Kill()
				time.Sleep(hold / 4)
				s.srv.Restart()
			})
		case "flushall":
			s.redisFault(func() { _ = s.admin.FlushAll(context.Background()).Err() })
		case "client-kill":
			s.redisFault(func() { _ = s.admin.Do(context.Background(), "CLIENT", "KILL", "TYPE", "pubsub").Err() })
		case "replace":
			s.stopMember(mb)
			s.startMember(mb.child)
		case "force-reset":
			if byCLI {
				_, _ = s.adminSt.ForceOpen(context.Background(), name)
			} else {
				mb.send("force " + name)
			}
			time.Sleep(hold)
			if byCLI {
				mb.send("reset " + name)
			} else {
				_, _ = s.adminSt.Reset(context.Background(), name)
			}
		case "reconfigure":
			if sb, _ := soakBreakerNamed(name); sb.failures > 0 {
				mb.send(fmt.Sprintf("reconf %s %d", name, threshold))
			}
		}
	}()
}

var redisFaults sync.Mutex // one fault of the server at a time

func (s *soak) redisFault(f func()) {
	redisFaults.Lock()
	defer redisFaults.Unlock()
	f()
}

// note keeps the soak's last actions, for a failure's report. s.mu held.
func (s *soak) note(what string) {
	s.recent = append(s.recent, time.Now().Format("15:04:05.000")+" "+what)
	if s.trace != nil {
		fmt.Fprintf(s.trace, "%s %s\n", time.Now().Format("15:04:05.000000"), what)
	}
	if len(s.recent) > 20 {
		s.recent = s.recent[1:]
	}
}

func (s *soak) live() []*soakMember {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*soakMember
	for _, mb := range s.members {
		out = append(out, mb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// startMember starts a member, in a child process or in this one, behind
// a proxy of its own.
func (s *soak) startMember(child bool) {
	s.mu.Lock()
	id := s.nextID
	s.nextID++
	s.views[id] = &memberView{alive: true, state: map[string]string{}, gen: map[string]uint64{}, down: map[string]bool{}}
	s.mu.Unlock()
	mb := &soakMember{id: id, child: child, proxy: startFaultProxy(s.t, s.srv.Addr()), done: make(chan struct{})}
	cfg := soakMemberConfig{ID: id, Redis: mb.proxy.addr(), Service: s.svc.URL}
	if child {
		env, _ := json.Marshal(cfg)
		mb.cmd = exec.Command(s.exe, "-test.run=^$")
		mb.cmd.Env = append(os.Environ(), soakMemberEnv+"="+string(env))
		mb.cmd.Stderr = os.Stderr
		out, err := mb.cmd.StdoutPipe()
		if err != nil {
			s.t.Fatal(err)
		}
		if mb.stdin, err = mb.cmd.StdinPipe(); err != nil {
			s.t.Fatal(err)
		}
		if err := mb.cmd.Start(); err != nil {
			s.t.Fatal(err)
		}
		go func() {
			defer close(mb.done)
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				var r soakRecord
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					s.violate("member output", fmt.Sprintf("m%d: %q: %v", id, sc.Text(), err))
					continue
				}
				s.handle(id, r)
			}
			_ = mb.cmd.Wait()
		}()
	} else {
		mb.cmds = make(chan string)
		go func() {
			defer close(mb.done)
			runSoakMember(cfg, mb.cmds, func(r soakRecord) { s.handle(id, r) })
		}()
	}
	s.mu.Lock()
	s.members[id] = mb
	s.note(fmt.Sprintf("m%d started (child %v)", id, child))
	s.mu.Unlock()
}

// stopMember stops a member and waits for its last records.
func (s *soak) stopMember(mb *soakMember) {
	s.mu.Lock()
	if s.members[mb.id] != mb {
		s.mu.Unlock()
		return
	}
	delete(s.members, mb.id)
	s.note(fmt.Sprintf("m%d stopping", mb.id))
	s.mu.Unlock()
	mb.send("stop")
	if mb.child {
		mb.stdin.Close()
	}
	select {
	case <-mb.done:
	case <-time.After(30 * time.Second):
		s.violate("stop", fmt.Sprintf("m%d did not end within 30s of its stop", mb.id))
		if mb.child {
			_ = mb.cmd.Process.Kill()
		}
		<-mb.done
	}
	mb.proxy.close()
	s.mu.Lock()
	v := s.views[mb.id]
	v.alive = false
	stopped := v.stopped
	s.mu.Unlock()
	if !stopped {
		s.violate("stop", fmt.Sprintf("m%d (a child) ended without reporting its Stop", mb.id))
	}
}

// handle checks and keeps a member's record.
func (s *soak) handle(id int, r soakRecord) {
	s.mu.Lock()
	if s.trace != nil {
		line, _ := json.Marshal(r)
		fmt.Fprintf(s.trace, "%s m%d %s\n", time.Now().Format("15:04:05.000000"), id, line)
	}
	v := s.views[id]
	var bad []string // violations, by kind and message
	switch r.T {
	case "ev":
		line := fmt.Sprintf("%s m%d %s %s", time.Now().Format("15:04:05.000"), id, r.Breaker, r.Kind)
		if r.Kind == "transition" {
			line += fmt.Sprintf(" %s->%s (%s)", r.From, r.To, r.Cause)
		}
		line += fmt.Sprintf(" gen %d", r.Gen)
		if r.Missed > 0 {
			line += fmt.Sprintf(" missed %d", r.Missed)
		}
		v.last = append(v.last, line)
		if len(v.last) > 12 {
			v.last = v.last[1:]
		}
		prevGen, seen := v.gen[r.Breaker]
		switch r.Kind {
		case "transition":
			s.edges[r.From+"->"+r.To+" ("+r.Cause+")"]++
			if seen && r.Missed == 0 && r.Gen != prevGen+1 {
				bad = append(bad, "events", fmt.Sprintf("m%d %s: a transition of gen %d after gen %d", id, r.Breaker, r.Gen, prevGen))
			}
			if seen && r.Gen <= prevGen {
				bad = append(bad, "events", fmt.Sprintf("m%d %s: gen %d after gen %d: generations must grow", id, r.Breaker, r.Gen, prevGen))
			}
			if prev := v.state[r.Breaker]; seen && r.Missed == 0 && prev != "" && prev != r.From {
				bad = append(bad, "events", fmt.Sprintf("m%d %s: %s->%s after a transition to %s", id, r.Breaker, r.From, r.To, prev))
			}
			if !soakEdge(r.From, r.To, r.Cause) {
				bad = append(bad, "events", fmt.Sprintf("m%d %s: %s->%s (%s) is no edge of the state graph", id, r.Breaker, r.From, r.To, r.Cause))
			}
			v.state[r.Breaker], v.gen[r.Breaker] = r.To, r.Gen
		default:
			// Another kind carries the generation of the transition
			// before it; a Reconfigure starts a generation of its own.
			if seen && r.Gen < prevGen {
				bad = append(bad, "events", fmt.Sprintf("m%d %s: a %s event of gen %d after gen %d", id, r.Breaker, r.Kind, r.Gen, prevGen))
			}
			v.gen[r.Breaker] = max(prevGen, r.Gen)
		}
		switch r.Kind {
		case "store_lost":
			v.down[r.Breaker], v.lost = true, true
		case "store_restored":
			v.down[r.Breaker] = false
		}
	case "slow":
		s.slowest = max(s.slowest, r.D)
		bad = append(bad, "call time", fmt.Sprintf("m%d %s: %s took %v, %v of it stalled (StoreTimeout %v, margin %v)", id, r.Breaker, r.Op, r.D, time.Duration(r.N), soakStoreTimeout, soakCallMargin))
	case "stalled":
		s.stalled++
		s.slowest = max(s.slowest, r.D)
	case "stall":
		s.pause = max(s.pause, r.D)
	case "downadmit":
		bad = append(bad, "fail closed", fmt.Sprintf("m%d %s: a call admitted while StoreDown before and after Acquire (%s)", id, r.Breaker, r.Msg))
	case "stats":
		s.storeErrs += r.N
		s.calls += r.Calls
		v.errs += r.N
	case "stopped":
		v.stopped = true
		if r.D > s.slowStop {
			s.slowStop = r.D
		}
		if r.D > soakStopWithin {
			bad = append(bad, "stop", fmt.Sprintf("m%d: Stop took %v", id, r.D))
		}
		if v.lost && v.errs == 0 {
			bad = append(bad, "store errors", fmt.Sprintf("m%d lost its store but counted no store error", id))
		}
	case "leak":
		bad = append(bad, "goroutines", fmt.Sprintf("m%d: goroutines left after Stop: %s", id, r.Msg))
	case "error":
		bad = append(bad, "member error", fmt.Sprintf("m%d %s: %s", id, r.Breaker, r.Msg))
	}
	s.mu.Unlock()
	for i := 0; i < len(bad); i += 2 {
		s.violate(bad[i], bad[i+1])
	}
}

// soakEdge reports whether from->to with cause is an edge of the state
// graph: the local cycle's, a forcing's and a reset's, an opening in a
// process alone, and any change of state followed from the fleet.
func soakEdge(from, to, cause string) bool {
	C, O, H, P := "closed", "open", "half_open", "probing"
	type e struct{ from, to, cause string }
	switch cause {
	case "shared":
		return from != to || to == O // open->open: a newer opening of the fleet
	case "force_open":
		return to == O && from != ""
	case "reset":
		return to == C && from != C
	}
	return slices.Contains([]e{
		{C, O, "trip"}, {O, H, "timer"}, {H, P, "probe"}, {P, C, "probe"}, {P, O, "probe"},
		{P, H, "probe"}, {P, H, "timer"}, {C, O, "alone"},
	}, e{from, to, cause})
}

// serve is the service: it fails the calls of a breaker in its failing
// phases, and checks that no two trials the store granted are in flight
// at once.
func (s *soak) serve(w http.ResponseWriter, r *http.Request) {
	name := r.Header.Get("X-Breaker")
	member, _ := strconv.Atoi(r.Header.Get("X-Member"))
	probe := r.Header.Get("X-Probe") == "true"
	down := r.Header.Get("X-Down") == "true"
	idx := slices.IndexFunc(soakBreakers, func(sb soakBreaker) bool { return sb.name == name })
	if idx < 0 {
		http.Error(w, "no such breaker", http.StatusBadRequest)
		return
	}
	// A trial counts when its manager reached the store around its
	// Acquire; a breaker with a quorum has trials of a process alone.
	fleet := probe && !down && soakBreakers[idx].quorum < 2
	if probe {
		s.mu.Lock()
		s.trials++
		if down {
			s.trialsDown++
		}
		var others []string
		if fleet {
			in := s.trialsIn[name]
			if in == nil {
				in = map[int]int{}
				s.trialsIn[name] = in
			}
			for m, n := range in {
				if n > 0 {
					others = append(others, "m"+strconv.Itoa(m))
				}
			}
			in[member]++
		}
		s.mu.Unlock()
		if len(others) > 0 {
			s.violate("trials", fmt.Sprintf("%s: a trial from m%d while %v had one in flight", name, member, others))
		}
		time.Sleep(10 * time.Millisecond) // a trial takes a while: another must not start meanwhile
		if fleet {
			s.mu.Lock()
			s.trialsIn[name][member]--
			s.mu.Unlock()
		}
	}
	if s.failing[idx].Load() {
		w.WriteHeader(http.StatusInternalServerError)
	}
}

// observe counts the changes of every breaker announced on the store, as
// an operator's watch hears them.
func (s *soak) observe(ctx context.Context) {
	for ctx.Err() == nil {
		_ = s.adminSt.Watch(ctx, func() {}, func(c store.Change) {
			s.mu.Lock()
			s.changes[c.Kind.String()]++
			s.mu.Unlock()
		})
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sample reads the store every 20ms: no probe lease may run longer than
// its breaker's ProbeTimeout.
func (s *soak) sample(ctx context.Context) {
	names := make([]string, len(soakBreakers))
	for i, sb := range soakBreakers {
		names[i] = sb.name
	}
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		sts, err := s.adminSt.Status(cctx, names)
		cancel()
		if err == nil {
			for i, st := range sts {
				s.mu.Lock()
				if st.Probe > s.maxLease {
					s.maxLease = st.Probe
				}
				s.mu.Unlock()
				if st.Probe > soakBreakers[i].probe {
					s.violate("lease", fmt.Sprintf("%s: a probe lease of %v, ProbeTimeout %v", names[i], st.Probe, soakBreakers[i].probe))
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// quiesce ends every fault, makes the service healthy and resets every
// breaker through the store, then checks that every manager follows the
// store within Resync plus the longest period and probe time, and what
// the store holds of each breaker.
func (s *soak) quiesce() {
	for _, mb := range s.live() {
		mb.proxy.heal()
		mb.proxy.setDelay(0)
	}
	s.srv.Resume()
	for i := range s.failing {
		s.failing[i].Store(false)
	}
	var longest time.Duration
	for _, sb := range soakBreakers {
		longest = max(longest, sb.open+sb.probe)
	}
	// A reset lifts any forcing left; it reaches every manager through
	// its watch, or its next Resync.
	start := time.Now()
	for _, sb := range soakBreakers {
		if _, err := s.adminSt.Reset(context.Background(), sb.name); err != nil {
			s.violate("quiesce", fmt.Sprintf("reset %s: %v", sb.name, err))
		}
	}
	within := soakResync + longest + time.Second // a second for a loaded machine
	deadline := start.Add(within)
	for {
		lag := s.lagging()
		if len(lag) == 0 {
			break
		}
		if time.Now().After(deadline) {
			s.violate("convergence", fmt.Sprintf("%v after the last fault, with the service healthy, managers still not closed on the store: %v", within, lag))
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.mu.Lock()
	s.converge = time.Since(start)
	s.mu.Unlock()
	// The store: closed, no marker, no lease, and only the keys
	// docs/fleet.md lists for a breaker closed again.
	for _, sb := range soakBreakers {
		b, _, err := s.adminSt.Inspect(context.Background(), sb.name)
		if err != nil {
			s.violate("store", fmt.Sprintf("inspect %s: %v", sb.name, err))
			continue
		}
		if b.Opened() || b.Forced || b.Open > 0 || b.Probe > 0 || b.Holder != "" {
			s.violate("store", fmt.Sprintf("%s: the store holds %+v after the fleet closed", sb.name, b))
		}
		keys, err := s.admin.Keys(context.Background(), "fusebox:{"+sb.name+"}:*").Result()
		if err != nil {
			s.violate("store", fmt.Sprintf("keys of %s: %v", sb.name, err))
			continue
		}
		for _, k := range keys {
			field := k[strings.LastIndex(k, ":")+1:]
			ttl, _ := s.admin.PTTL(context.Background(), k).Result()
			switch field {
			case "epoch", "since":
				// Kept, without expiry, as the epoch is: since says
				// when the epoch's state began.
			case "failures", "window", "reporters":
				if ttl < 0 {
					s.violate("store", fmt.Sprintf("%s: key %s has no expiry", sb.name, k))
				}
			case "open":
				// In a closed epoch, the marker is the fleet's slow
				// start, which runs out by itself.
				if sb.slowStart == 0 || ttl < 0 || ttl > sb.slowStart {
					s.violate("store", fmt.Sprintf("%s: key %s on a closed, healthy breaker (PTTL %v)", sb.name, k, ttl))
				}
			default:
				s.violate("store", fmt.Sprintf("%s: key %s on a closed, healthy breaker", sb.name, k))
			}
		}
	}
}

// lagging lists the managers, with their breakers, whose state is not
// closed on a reachable store.
func (s *soak) lagging() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id, v := range s.views {
		if !v.alive {
			continue
		}
		for _, sb := range soakBreakers {
			if st := v.state[sb.name]; (st != "" && st != "closed") || v.down[sb.name] {
				out = append(out, fmt.Sprintf("m%d %s %s (down %v)", id, sb.name, v.state[sb.name], v.down[sb.name]))
			}
		}
	}
	sort.Strings(out)
	return out
}

// violate reports a broken invariant: the first of each kind with the
// seed, the soak's last actions and the last events of every manager.
func (s *soak) violate(kind, msg string) {
	s.mu.Lock()
	s.violations[kind]++
	first := !s.dumped[kind]
	s.dumped[kind] = true
	n := s.violations[kind]
	var dump strings.Builder
	if first {
		fmt.Fprintf(&dump, "the soak's last actions:\n")
		for _, a := range s.recent {
			fmt.Fprintf(&dump, "  %s\n", a)
		}
		ids := make([]int, 0, len(s.views))
		for id := range s.views {
			ids = append(ids, id)
		}
		sort.Ints(ids)
		for _, id := range ids {
			fmt.Fprintf(&dump, "m%d's last events:\n", id)
			for _, l := range s.views[id].last {
				fmt.Fprintf(&dump, "  %s\n", l)
			}
		}
	}
	s.mu.Unlock()
	if first {
		s.t.Errorf("seed %d: %s: %s\n%s", s.seed, kind, msg, dump.String())
	} else if n <= 5 {
		s.t.Errorf("seed %d: %s: %s", s.seed, kind, msg)
	}
}

// report logs the run's figures and fails the test, with the seed, if
// an invariant broke.
func (s *soak) report() {
	s.mu.Lock()
	defer s.mu.Unlock()
	var faults []string
	total := 0
	for k, n := range s.faults {
		faults = append(faults, fmt.Sprintf("%s %d", k, n))
		total += n
	}
	sort.Strings(faults)
	var edges []string
	for e, n := range s.edges {
		edges = append(edges, fmt.Sprintf("%s: %d", e, n))
	}
	sort.Strings(edges)
	var changes []string
	for k, n := range s.changes {
		changes = append(changes, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(changes)
	s.t.Logf("FIGURES fleet soak: seed %d, %d managers over the run; %d faults (%s); changes heard on the store: %s; %d trials (%d by a manager whose store was down); %d calls; %d store errors; slowest convergence %v; slowest Stop %v; longest lease seen %v; slowest call %v (%d over the limit, each explained by its process's stalls; longest stall %v)",
		s.seed, s.nextID, total, strings.Join(faults, ", "), strings.Join(changes, ", "), s.trials, s.trialsDown, s.calls, s.storeErrs, s.converge.Round(time.Millisecond), s.slowStop.Round(time.Millisecond), s.maxLease, s.slowest.Round(time.Millisecond), s.stalled, s.pause.Round(time.Millisecond))
	s.t.Logf("transitions by edge:\n  %s", strings.Join(edges, "\n  "))
	if len(s.violations) > 0 {
		s.t.Errorf("seed %d: invariants broken: %v (replay: %s=1 %s=%d)", s.seed, s.violations, soakEnv, soakSeedEnv, s.seed)
	}
}

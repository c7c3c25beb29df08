package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The side-by-side run ("fleet compare"): N child processes call one
// loopback HTTP service through a breaker each, of one library at a time;
// the service fails for a while and then recovers. See docs/fleet.md,
// "What sharing buys".

// compareOptions is what the flags of "fleet compare" say.
type compareOptions struct {
	processes []int
	libs      []string
	pace      time.Duration // each process's call interval
	open      time.Duration
	fail      time.Duration
	after     time.Duration // measured after the service recovers
	warm      time.Duration
	healthy   time.Duration // the healthy window measured
	lockRetry time.Duration
	doc, svg  string
	command   string
}

func parseCompareFlags(args []string, log io.Writer) (compareOptions, error) {
	var o compareOptions
	fs := flag.NewFlagSet("fleet compare", flag.ContinueOnError)
	fs.SetOutput(log)
	processes := fs.String("processes", "10,100", "comma-separated numbers of child processes, each calling through its own breaker")
	libs := fs.String("libs", strings.Join(compareLibs, ","), "comma-separated breakers to run, of: "+strings.Join(compareLibs, ", "))
	fs.DurationVar(&o.pace, "every", 10*time.Millisecond, "each process calls the service once every this long")
	fs.DurationVar(&o.open, "open", 200*time.Millisecond, "every breaker's open period")
	fs.DurationVar(&o.fail, "fail", 2*time.Second, "how long the service fails")
	fs.DurationVar(&o.after, "after", 5*time.Second, "how long the run goes on after the service recovers (a column a second)")
	fs.DurationVar(&o.warm, "warm", 2*time.Second, "healthy calls before the healthy window (the children's start settles)")
	fs.DurationVar(&o.healthy, "healthy", 1500*time.Millisecond, "the healthy window: latencies and Redis commands")
	fs.DurationVar(&o.lockRetry, "lock-retry", 2*time.Millisecond, "the gobreaker store's mean wait before it asks again for a held lock")
	fs.StringVar(&o.doc, "doc", "", "write the table into this file, between its markers (docs/fleet.md), and the chart beside it")
	fs.StringVar(&o.svg, "svg", "", "write the chart here (default: fleet-compare.svg beside -doc)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.processes, err = ints(*processes); err != nil {
		return o, fmt.Errorf("-processes: %w", err)
	}
	for _, l := range strings.Split(*libs, ",") {
		l = strings.TrimSpace(l)
		found := false
		for _, k := range compareLibs {
			found = found || k == l
		}
		if !found {
			return o, fmt.Errorf("-libs: unknown breaker %q (want some of %s)", l, strings.Join(compareLibs, ", "))
		}
		o.libs = append(o.libs, l)
	}
	if o.pace <= 0 || o.open <= 0 || o.fail <= 0 || o.after < time.Second || o.warm < 0 || o.healthy <= 0 || o.lockRetry <= 0 {
		return o, errors.New("-every, -open, -fail, -healthy and -lock-retry must be positive, -after at least 1s, -warm not negative")
	}
	if o.svg == "" && o.doc != "" {
		o.svg = filepath.Join(filepath.Dir(o.doc), "fleet-compare.svg")
	}
	o.command = "go run ./cmd/fleet compare"
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "svg" {
			return
		}
		o.command += " -" + f.Name + " " + quoteArg(f.Value.String())
	})
	return o, nil
}

func quoteArg(s string) string {
	if strings.ContainsAny(s, " \"'") {
		return strconv.Quote(s)
	}
	return s
}

// runCompare is "fleet compare": every library at every number of
// processes, then the table, and with -doc the guide and the chart.
func runCompare(ctx context.Context, args []string, stdout, log io.Writer) error {
	o, err := parseCompareFlags(args, log)
	if err != nil {
		return err
	}
	env := describe(ctx)
	svc, err := startService()
	if err != nil {
		return err
	}
	defer svc.close()
	started, loadBefore := time.Now(), loadAverage()
	var runs []scenario
	for _, n := range o.processes {
		for _, lib := range o.libs {
			t0 := time.Now()
			fmt.Fprintf(log, "%d processes, %s:\n", n, lib)
			s, err := runScenario(ctx, o, svc, lib, n, log)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				fmt.Fprintf(log, "  failed: %v\n", err)
				s = scenario{lib: lib, processes: n, failed: err.Error()}
			}
			fmt.Fprintf(log, "  done in %v\n", time.Since(t0).Round(100*time.Millisecond))
			runs = append(runs, s)
		}
	}
	rep := compareReport{opts: o, runs: runs, env: env, started: started, elapsed: time.Since(started), loadBefore: loadBefore, loadAfter: loadAverage()}
	text := rep.markdown()
	if _, err := io.WriteString(stdout, text+"\n"); err != nil {
		return err
	}
	if o.svg != "" {
		if err := os.WriteFile(o.svg, rep.chart(), 0o644); err != nil {
			return err
		}
	}
	if o.doc != "" {
		return splice(o.doc, []part{{"compare", text}})
	}
	return nil
}

// scenario is one library at one number of processes, as measured.
type scenario struct {
	lib       string
	processes int
	failed    string // why it was not measured
	pace      time.Duration
	open      time.Duration
	after     time.Duration
	// failFrom and failUntil are when the service failed, Unix
	// nanoseconds.
	failFrom, failUntil int64
	arrivals            []arrival // the calls through a breaker the service saw
	opens               []int64   // each opening in a child, Unix nanoseconds
	trials              []trialCall
	// windowCalls is how many calls through a breaker the service saw in
	// the healthy window; ran the commands Redis ran then (INFO
	// commandstats, INFO left out), the commands scripts call inside
	// included.
	windowCalls int64
	window      time.Duration // the healthy window's length
	ran         int64
	stats       childStatsCompare // every child's, merged
}

// trialCall is a trial call a child reported: when it began and whether
// the service answered.
type trialCall struct {
	at int64
	ok bool
}

// runScenario runs lib in n processes: a fresh redis-server for a shared
// breaker, the children; healthy calls (warm, then the measured window);
// the service fails for o.fail; the run goes on for o.after.
func runScenario(ctx context.Context, o compareOptions, svc *service, lib string, n int, log io.Writer) (scenario, error) {
	s := scenario{lib: lib, processes: n, pace: o.pace, open: o.open, after: o.after, window: o.healthy}
	cfg := compareChildConfig{Lib: lib, Service: svc.url, Pace: o.pace, Open: o.open, LockRetry: o.lockRetry}
	var srv *server
	if libShared(lib) {
		var err error
		if srv, err = startServer(ctx); err != nil {
			return s, err
		}
		defer srv.stop()
		cfg.Redis = srv.addr
	}
	svc.reset()
	g, err := startGroup(cfg, n, log)
	if err != nil {
		return s, err
	}
	defer g.stop()
	if _, err := g.collect("ready", n, 2*time.Minute); err != nil {
		return s, err
	}
	if err := g.sendAll("go"); err != nil {
		return s, err
	}
	if err := sleep(ctx, o.warm); err != nil {
		return s, err
	}

	var a, b info
	if srv != nil {
		if a, err = srv.info(ctx, "commandstats"); err != nil {
			return s, err
		}
	}
	c0 := svc.through.Load()
	if err := g.sendAll("time"); err != nil {
		return s, err
	}
	if err := sleep(ctx, o.healthy); err != nil {
		return s, err
	}
	if err := g.sendAll("quiet"); err != nil {
		return s, err
	}
	s.windowCalls = svc.through.Load() - c0
	if srv != nil {
		if b, err = srv.info(ctx, "commandstats"); err != nil {
			return s, err
		}
		s.ran = b.commands() - a.commands()
	}
	if err := sleep(ctx, 200*time.Millisecond); err != nil {
		return s, err
	}

	fmt.Fprintf(log, "  the service fails for %v\n", o.fail)
	s.failFrom, s.failUntil = svc.fail(o.fail)
	if err := sleep(ctx, o.fail+o.after+100*time.Millisecond); err != nil {
		return s, err
	}
	if err := g.sendAll("stop"); err != nil {
		return s, err
	}
	rs, err := g.collect("stats", n, time.Minute)
	if err != nil {
		return s, err
	}
	for _, r := range rs {
		var st childStatsCompare
		if err := json.Unmarshal([]byte(strings.Join(r.fields, " ")), &st); err != nil {
			return s, fmt.Errorf("child %d: stats: %w", r.child, err)
		}
		s.stats.Through = append(s.stats.Through, st.Through...)
		s.stats.Direct = append(s.stats.Direct, st.Direct...)
		s.stats.Own = append(s.stats.Own, st.Own...)
		s.stats.Sent += st.Sent
		s.stats.Calls += st.Calls
		s.stats.Declined += st.Declined
		s.stats.StoreErrors += st.StoreErrors
		s.stats.StoreErrorsEarly += st.StoreErrorsEarly
	}
	s.arrivals = svc.take()
	s.opens, s.trials = g.take()
	return s, nil
}

// service is the loopback HTTP service the children call: /through
// through their breaker, /direct beside it. It answers 503 while it fails
// and 200 otherwise, and stamps every call through a breaker on arrival.
type service struct {
	srv *http.Server
	url string

	failFrom, failUntil atomic.Int64 // Unix nanoseconds
	through             atomic.Int64 // calls through a breaker

	mu       sync.Mutex
	arrivals []arrival
}

// arrival is a call through a breaker, on the service's clock.
type arrival struct {
	at     int64 // Unix nanoseconds
	failed bool  // the service was failing
}

func startService() (*service, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("the service: %w", err)
	}
	s := &service{url: "http://" + ln.Addr().String()}
	s.reset()
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now().UnixNano()
	failing := now >= s.failFrom.Load() && now < s.failUntil.Load()
	if r.URL.Path == "/through" {
		s.through.Add(1)
		s.mu.Lock()
		s.arrivals = append(s.arrivals, arrival{at: now, failed: failing})
		s.mu.Unlock()
	}
	if failing {
		http.Error(w, "failing", http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok")
}

// fail makes the service fail from now for d, and returns when.
func (s *service) fail(d time.Duration) (from, until int64) {
	now := time.Now()
	from, until = now.UnixNano(), now.Add(d).UnixNano()
	s.failUntil.Store(until)
	s.failFrom.Store(from)
	return from, until
}

// reset makes the service healthy and forgets its calls.
func (s *service) reset() {
	s.failFrom.Store(1<<63 - 1)
	s.failUntil.Store(0)
	s.through.Store(0)
	s.take()
}

func (s *service) take() []arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.arrivals
	s.arrivals = nil
	return a
}

func (s *service) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}

// group is the child processes of one scenario, seen from the parent: one
// goroutine a child files its openings and trials as they come, and hands
// every other line to replies.
type group struct {
	procs   []*proc
	replies chan reply

	mu     sync.Mutex
	opens  []int64
	trials []trialCall
}

type proc struct {
	idx    int
	cmd    *exec.Cmd
	in     io.WriteCloser
	exited chan struct{}
}

// startGroup starts n children of cfg, this program again with
// compareChildEnv set.
func startGroup(cfg compareChildConfig, n int, log io.Writer) (*group, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	g := &group{replies: make(chan reply, 4*n+16)}
	for i := range n {
		c := cfg
		c.Index = i
		env, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		p := &proc{idx: i, exited: make(chan struct{})}
		p.cmd = exec.Command(self)
		p.cmd.Env = append(os.Environ(), compareChildEnv+"="+string(env))
		stdout, err := p.cmd.StdoutPipe()
		if err != nil {
			g.kill()
			return nil, err
		}
		stderr, err := p.cmd.StderrPipe()
		if err != nil {
			g.kill()
			return nil, err
		}
		if p.in, err = p.cmd.StdinPipe(); err != nil {
			g.kill()
			return nil, err
		}
		if err := p.cmd.Start(); err != nil {
			g.kill()
			return nil, fmt.Errorf("starting a child: %w", err)
		}
		g.procs = append(g.procs, p)
		go copyLines(log, stderr, fmt.Sprintf("  child %d: ", i), 10)
		go g.read(p, stdout)
	}
	return g, nil
}

func (g *group) read(p *proc, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "open" && len(f) == 2:
			if at, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				g.mu.Lock()
				g.opens = append(g.opens, at)
				g.mu.Unlock()
				continue
			}
		case f[0] == "trial" && len(f) == 3:
			if at, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				g.mu.Lock()
				g.trials = append(g.trials, trialCall{at: at, ok: f[2] == "1"})
				g.mu.Unlock()
				continue
			}
		}
		g.replies <- reply{child: p.idx, kind: f[0], fields: f[1:]}
	}
	close(p.exited)
	select {
	case g.replies <- reply{child: p.idx, kind: "exit"}:
	default:
	}
}

func (g *group) sendAll(line string) error {
	for _, p := range g.procs {
		if _, err := io.WriteString(p.in, line+"\n"); err != nil {
			return fmt.Errorf("child %d: %w", p.idx, err)
		}
	}
	return nil
}

// collect waits for n replies of kind, within d.
func (g *group) collect(kind string, n int, d time.Duration) ([]reply, error) {
	timeout := time.After(d)
	var got []reply
	for len(got) < n {
		select {
		case r := <-g.replies:
			if r.kind != kind {
				return nil, fmt.Errorf("child %d: waiting for %q, got %q %s", r.child, kind, r.kind, strings.Join(r.fields, " "))
			}
			got = append(got, r)
		case <-timeout:
			return nil, fmt.Errorf("%d of %d children said %q within %v", len(got), n, kind, d)
		}
	}
	return got, nil
}

// take returns the openings and trials filed so far.
func (g *group) take() ([]int64, []trialCall) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int64(nil), g.opens...), append([]trialCall(nil), g.trials...)
}

// stop asks every child to quit, waits for each within 15s, and kills
// those left.
func (g *group) stop() {
	for _, p := range g.procs {
		_, _ = io.WriteString(p.in, "quit\n")
		p.in.Close()
	}
	deadline := time.After(15 * time.Second)
	for _, p := range g.procs {
		select {
		case <-p.exited:
		case <-deadline:
		}
	}
	g.kill()
}

func (g *group) kill() {
	for _, p := range g.procs {
		if p.cmd.Process != nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	}
}

// Command fleet measures what a fleet of managers sharing breakers through
// one redis-server costs Redis, and how the fleet behaves when a service
// fails: the figures docs/fleet.md sizes a fleet from.
//
// Run it from the bench module:
//
//	go run ./cmd/fleet                                  # the matrix, printed
//	go run ./cmd/fleet -doc ../docs/fleet.md            # the matrix, written into the guide
//	go run ./cmd/fleet -managers 10 -breakers 1000      # one configuration
//	go run ./cmd/fleet compare -doc ../docs/fleet.md    # the breakers side by side
//
// It starts redis-server from PATH on a loopback port, then, for every
// configuration of N managers and K breakers, starts the managers in child
// OS processes (this program again, at most -per-process managers to a
// process, each manager with its own go-redis client and so its own
// connections), every manager registering the same K shared breakers
// (breaker.Consecutive{Failures: 5} on redisstore.New(client,
// redisstore.Options{})). Redis is restarted empty for each configuration.
// Each configuration then runs these phases, in order:
//
//   - idle: nothing calls; Redis's commands, CPU and network over -window;
//   - openings: -trips times, one manager (in turn) fails a breaker 5
//     times and every other manager reports when that breaker turned open
//     in it, on its own wall clock (every process reads the same
//     CLOCK_REALTIME of one machine), so the delay excludes the pipes to
//     the parent;
//   - memory: the first manager puts half the breakers in each state
//     (counting one failure, open, closed again by Reset) and the growth
//     of Redis's used_memory (less its clients' buffers) is divided by
//     their number;
//   - one fails: every manager calls breaker 0, whose service fails for
//     -fail and then answers;
//   - 10% fail: every manager calls the first tenth of the breakers, whose
//     service fails for -fail and then answers.
//
// During a fault every call that reaches the failing service, and every
// trial call, is reported to the parent, which counts the trial calls at
// each period end across the fleet (it must be 1) and the calls let
// through before and after the first trial. The breakers a fault fails
// open for -open (recover.BasicTimeout), so that several periods end
// within the run; the others keep the default Recover.
//
// Configurations of more than -max-pairs managers x breakers are left out
// (the default leaves out 100 x 10,000; -max-pairs 0 runs every one).
//
// "fleet compare" runs the breakers side by side instead (compare.go): N
// child processes call one loopback HTTP service that fails for a while
// and then recovers, each through a breaker of one library at a time (a
// fusebox breaker per process, a fusebox breaker shared through
// redisstore, a gobreaker breaker per process, gobreaker's
// DistributedCircuitBreaker on Redis, a failsafe-go breaker per process),
// all opening after 5 failures in a row for 200ms and closing on one
// trial call; it counts the calls that reached the failing service, the
// trial calls at each period end, the calls after the recovery, the Redis
// commands per healthy call and a healthy call's added latency, and with
// -doc writes the table into docs/fleet.md and its chart beside it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if raw, ok := os.LookupEnv(childEnv); ok {
		if err := childMain(raw); err != nil {
			fmt.Fprintln(os.Stderr, "fleet child:", err)
			os.Exit(1)
		}
		return
	}
	if raw, ok := os.LookupEnv(compareChildEnv); ok {
		if err := compareChildMain(raw); err != nil {
			fmt.Fprintln(os.Stderr, "fleet compare child:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

// options is what the flags say.
type options struct {
	managers, breakers []int
	maxPairs           int
	perProcess         int
	window             time.Duration
	fail, open         time.Duration
	trips              int
	resync, timeout    time.Duration
	workers            int
	pace               time.Duration
	memory, fleet      bool // which parts to measure
	doc                string
	command            string // the command line, as a user would type it in bench/
}

func parseFlags(args []string, log io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	fs.SetOutput(log)
	managers := fs.String("managers", "1,10,100", "comma-separated numbers of managers")
	breakers := fs.String("breakers", "100,1000,10000", "comma-separated numbers of shared breakers each manager registers")
	fs.IntVar(&o.maxPairs, "max-pairs", 100_000, "leave out configurations of more than this many managers x breakers (0: none)")
	fs.IntVar(&o.perProcess, "per-process", 4, "managers per child process, at most")
	fs.DurationVar(&o.window, "window", 3*time.Second, "the idle window measured")
	fs.DurationVar(&o.fail, "fail", 2*time.Second, "how long the service fails in each fault script")
	fs.DurationVar(&o.open, "open", time.Second, "the open period of the breakers the fault scripts fail")
	fs.IntVar(&o.trips, "trips", 30, "openings timed in each configuration")
	fs.DurationVar(&o.resync, "resync", 0, "manager.Options.Resync (0: the manager's default)")
	fs.DurationVar(&o.timeout, "store-timeout", 0, "manager.Options.StoreTimeout (0: the manager's default)")
	fs.IntVar(&o.workers, "workers", 4, "calling goroutines per manager while a fault runs")
	fs.DurationVar(&o.pace, "pace", 2*time.Millisecond, "each calling goroutine's pause between its sweeps")
	fs.BoolVar(&o.memory, "memory", true, "measure Redis memory per breaker")
	fs.BoolVar(&o.fleet, "fleet", true, "measure the fleets of the matrix")
	fs.StringVar(&o.doc, "doc", "", "write the tables measured into this file, each part between its markers (docs/fleet.md)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.managers, err = ints(*managers); err != nil {
		return o, fmt.Errorf("-managers: %w", err)
	}
	if o.breakers, err = ints(*breakers); err != nil {
		return o, fmt.Errorf("-breakers: %w", err)
	}
	for _, k := range o.breakers {
		if k < 20 {
			return o, fmt.Errorf("-breakers: %d is fewer than 20, too few to hold the fault, trip and memory sets", k)
		}
	}
	switch {
	case o.perProcess < 1, o.trips < 0, o.workers < 1:
		return o, errors.New("-per-process and -workers must be at least 1, -trips at least 0")
	case o.window <= 0, o.fail <= 0, o.open <= 0, o.pace <= 0:
		return o, errors.New("-window, -fail, -open and -pace must be positive")
	}
	o.command = "go run ./cmd/fleet"
	fs.Visit(func(f *flag.Flag) {
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			o.command += " -" + f.Name + "=" + f.Value.String()
			return
		}
		o.command += " -" + f.Name + " " + f.Value.String()
	})
	return o, nil
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// resyncOf is the Resync the managers run with: the manager raises one
// below 10ms to 10ms, and a zero one means a second (manager.Options).
func (o options) resyncOf() time.Duration {
	if o.resync > 0 {
		return max(o.resync, 10*time.Millisecond)
	}
	return time.Second
}

func run(ctx context.Context, args []string, stdout, log io.Writer) error {
	if len(args) > 0 && args[0] == "compare" {
		return runCompare(ctx, args[1:], stdout, log)
	}
	o, err := parseFlags(args, log)
	if err != nil {
		return err
	}
	env := describe(ctx)
	var parts []part
	if o.memory {
		started := time.Now()
		var mems []memory
		for _, k := range o.breakers {
			fmt.Fprintf(log, "memory of %d breakers\n", k)
			m, err := memoryOf(ctx, o, k, log)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				fmt.Fprintf(log, "  failed: %v\n", err)
				m = memory{breakers: k, failed: err.Error()}
			}
			mems = append(mems, m)
		}
		rep := report{opts: o, memory: mems, started: started, elapsed: time.Since(started), env: env}
		parts = append(parts, part{"memory", rep.memoryMarkdown()})
	}
	if o.fleet {
		started := time.Now()
		var results []result
		for _, n := range o.managers {
			for _, k := range o.breakers {
				if o.maxPairs > 0 && n*k > o.maxPairs {
					fmt.Fprintf(log, "%d managers x %d breakers: left out (more than -max-pairs %d)\n", n, k, o.maxPairs)
					results = append(results, result{managers: n, breakers: k, skipped: fmt.Sprintf("left out: more than -max-pairs %d", o.maxPairs)})
					continue
				}
				t0 := time.Now()
				fmt.Fprintf(log, "%d managers x %d breakers:\n", n, k)
				r, err := measure(ctx, o, n, k, log)
				if err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					fmt.Fprintf(log, "  failed: %v\n", err)
					r = result{managers: n, breakers: k, skipped: "failed: " + err.Error()}
				}
				fmt.Fprintf(log, "  done in %v\n", time.Since(t0).Round(100*time.Millisecond))
				results = append(results, r)
			}
		}
		rep := report{opts: o, results: results, started: started, elapsed: time.Since(started), env: env}
		parts = append([]part{{"measured", rep.markdown()}}, parts...)
	}
	for _, pt := range parts {
		if _, err := io.WriteString(stdout, pt.text+"\n"); err != nil {
			return err
		}
	}
	if o.doc != "" {
		return splice(o.doc, parts)
	}
	return nil
}

// result is what one configuration measured.
type result struct {
	managers, breakers, processes int
	skipped                       string // why it was not measured
	register                      []time.Duration
	idle                          load
	// perManager is what the idle fleet added to Redis's used_memory over
	// the empty server's, per manager: its connections, since a breaker
	// that never failed has no key; quietKeys is the keys it added, per
	// breaker.
	perManager, quietKeys float64
	prop                  propagation
	one, tenth            faultResult
	final                 childStats
}

// measure runs one configuration on a fresh redis-server.
func measure(ctx context.Context, o options, n, k int, log io.Writer) (result, error) {
	r := result{managers: n, breakers: k}
	srv, err := startServer(ctx)
	if err != nil {
		return r, err
	}
	defer srv.stop()
	empty, err := srv.sample(ctx)
	if err != nil {
		return r, err
	}

	tenth := k / 10
	cfg := childConfig{
		Redis: srv.addr, Breakers: k, Faulted: tenth,
		TripFrom: tenth, TripTo: tenth + min(o.trips, k/2-tenth),
		Open: o.open, Resync: o.resync, StoreTimeout: o.timeout,
		Workers: o.workers, Pace: o.pace,
	}
	f, err := startFleet(cfg, n, o.perProcess, log)
	if err != nil {
		return r, err
	}
	defer f.stop()
	r.processes = len(f.children)
	fmt.Fprintf(log, "  %d processes registering\n", r.processes)
	ready, err := f.collect("ready", len(f.children), 5*time.Minute)
	if err != nil {
		return r, err
	}
	for _, rp := range ready {
		for _, s := range rp.fields {
			ns, _ := strconv.ParseInt(s, 10, 64)
			r.register = append(r.register, time.Duration(ns))
		}
	}

	// Idle: the join reads and a first resync are over after two
	// resyncs.
	if err := sleep(ctx, max(time.Second, 2*o.resyncOf())); err != nil {
		return r, err
	}
	fmt.Fprintf(log, "  idle for %v\n", o.window)
	r.idle, err = window(ctx, srv, f, func() error { return sleep(ctx, o.window) })
	if err != nil {
		return r, err
	}
	quiet, err := srv.sample(ctx)
	if err != nil {
		return r, err
	}
	r.perManager = (quiet.float("used_memory") - empty.float("used_memory")) / float64(n)
	_, r.quietKeys = perBreaker(empty, quiet, k)

	if n > 1 {
		fmt.Fprintf(log, "  %d openings\n", cfg.TripTo-cfg.TripFrom)
		if err := trips(ctx, f, n, cfg, &r.prop); err != nil {
			return r, err
		}
	}

	fmt.Fprintf(log, "  one fails for %v\n", o.fail)
	if r.one, err = fault(ctx, o, srv, f, 0, 1); err != nil {
		return r, err
	}
	if err := sleep(ctx, o.open); err != nil {
		return r, err
	}
	fmt.Fprintf(log, "  %d fail for %v\n", tenth, o.fail)
	if r.tenth, err = fault(ctx, o, srv, f, 0, tenth); err != nil {
		return r, err
	}
	r.final, err = f.stats()
	return r, err
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// window measures the load while during runs.
func window(ctx context.Context, srv *server, f *fleet, during func() error) (load, error) {
	sa, err := f.stats()
	if err != nil {
		return load{}, err
	}
	a, err := srv.sample(ctx)
	if err != nil {
		return load{}, err
	}
	if err := during(); err != nil {
		return load{}, err
	}
	b, err := srv.sample(ctx)
	if err != nil {
		return load{}, err
	}
	sb, err := f.stats()
	if err != nil {
		return load{}, err
	}
	return loadOf(a, b, sa, sb), nil
}

// trips opens the trip breakers one by one, each from another manager in
// turn, and times how long each opening took to reach every other manager.
func trips(ctx context.Context, f *fleet, n int, cfg childConfig, p *propagation) error {
	const bound = 5 * time.Second
	for i, b := 0, cfg.TripFrom; b < cfg.TripTo; i, b = i+1, b+1 {
		tripper := i % n
		if err := f.send(f.childOf(tripper), "trip %d %d", tripper, b); err != nil {
			return err
		}
		var mine int64
		var others []int64
		timeout := time.After(bound)
	wait:
		for len(others) < n-1 || mine == 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case op := <-f.opens:
				switch {
				case op.breaker != b:
					// a late report of an earlier trip
				case op.manager == tripper:
					mine = op.at
				default:
					others = append(others, op.at)
				}
			case <-timeout:
				break wait
			}
		}
		if mine == 0 {
			return fmt.Errorf("manager %d did not open breaker %d with %d failures within %v", tripper, b, tripAfter, bound)
		}
		p.add(mine, others, n-1-len(others))
	}
	return nil
}

// memoryOf measures what a breaker in each state of memState adds to
// Redis's memory, on a fresh server and a fleet of one manager that
// registers k breakers with a Resync of an hour: the state of a breaker
// takes the same memory whatever the fleet, and only a quiet server
// shows it in used_memory (each resync's pipeline grows and shrinks its
// client's buffers by more than a few keys take, and Redis updates
// mem_clients_normal only from time to time).
//
// The manager puts the breakers [k/4, k) in each state in turn, one
// breaker after another, and Redis's memory is read after each step. A
// connection Redis has not seen before adds to its memory too, and the
// openings' store calls run beside the next breaker's failures: so the
// same steps are first made on the breakers [0, k/4), unmeasured, which
// opens the connections the steps need and loads the scripts.
func memoryOf(ctx context.Context, o options, k int, log io.Writer) (memory, error) {
	m := memory{breakers: k}
	srv, err := startServer(ctx)
	if err != nil {
		return m, err
	}
	defer srv.stop()
	empty, err := srv.sample(ctx)
	if err != nil {
		return m, err
	}
	f, err := startFleet(childConfig{Redis: srv.addr, Breakers: k, Resync: time.Hour, StoreTimeout: o.timeout, Workers: 1, Pace: o.pace}, 1, 1, log)
	if err != nil {
		return m, err
	}
	defer f.stop()
	if _, err := f.collect("ready", 1, 5*time.Minute); err != nil {
		return m, err
	}
	quiet, err := settled(ctx, srv)
	if err != nil {
		return m, err
	}
	_, m.keys[memQuiet] = perBreaker(empty, quiet, k)
	steps := func(from, to int) []string {
		return []string{
			fmt.Sprintf("fail %d %d 1", from, to),
			fmt.Sprintf("fail %d %d %d", from, to, tripAfter-1),
			fmt.Sprintf("reset %d %d", from, to),
		}
	}
	do := func(cmd string) error {
		if err := f.send(f.children[0], "%s", cmd); err != nil {
			return err
		}
		_, err := f.collect("done", 1, 5*time.Minute)
		return err
	}
	for _, cmd := range steps(0, k/4) {
		if err := do(cmd); err != nil {
			return m, err
		}
	}
	base, err := settled(ctx, srv)
	if err != nil {
		return m, err
	}
	from := k / 4
	m.measured = k - from
	for i, cmd := range steps(from, k) {
		if err := do(cmd); err != nil {
			return m, err
		}
		now, err := settled(ctx, srv)
		if err != nil {
			return m, err
		}
		st := memCounted + memState(i)
		m.bytes[st], m.keys[st] = perBreaker(base, now, m.measured)
		m.clients = max(m.clients, now.float("connected_clients")-base.float("connected_clients"))
	}
	return m, nil
}

// settleHold is how long Redis's memory must hold still for settled; the
// smoke test shortens it.
var settleHold = 2500 * time.Millisecond

// settled reads INFO once Redis's keys and data memory (dataMemory) have
// stopped changing: readings a tenth of settleHold apart have agreed
// (within 256 bytes) for settleHold, or 15s passed. Redis shrinks a
// client's query buffer only once the client has been idle for 2s (a
// status read of K breakers leaves one of about 40K bytes), and
// mem_clients_normal may follow it late, so a reading taken sooner may
// count a buffer freed later as a breaker's memory, or the other way
// round.
func settled(ctx context.Context, srv *server) (info, error) {
	hold, every := settleHold, settleHold/10
	prev, err := srv.sample(ctx)
	if err != nil {
		return info{}, err
	}
	since := time.Now()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		if err := sleep(ctx, every); err != nil {
			return info{}, err
		}
		now, err := srv.sample(ctx)
		if err != nil {
			return info{}, err
		}
		if now.keys() != prev.keys() || math.Abs(now.dataMemory()-prev.dataMemory()) > 256 {
			since = time.Now()
		} else if time.Since(since) >= hold {
			return now, nil
		}
		prev = now
	}
	return prev, nil
}

// fault runs a fault script on breakers [from, to): every manager calls
// them while their service fails for -fail, and on for two open periods
// and a second more, by which time every breaker has had its trial after
// the service came back.
func fault(ctx context.Context, o options, srv *server, f *fleet, from, to int) (faultResult, error) {
	f.takeCalls()
	var notClosed int
	l, err := window(ctx, srv, f, func() error {
		if err := f.sendAll("fault %d %d %d", from, to, o.fail.Milliseconds()); err != nil {
			return err
		}
		if err := sleep(ctx, o.fail+2*o.open+time.Second); err != nil {
			return err
		}
		if err := f.sendAll("stop"); err != nil {
			return err
		}
		rs, err := f.collect("stopped", len(f.children), time.Minute)
		for _, r := range rs {
			if len(r.fields) == 1 {
				c, _ := strconv.Atoi(r.fields[0])
				notClosed += c
			}
		}
		return err
	})
	if err != nil {
		return faultResult{}, err
	}
	r := analyse(f.takeCalls(), to-from, o.open/2)
	r.notClosed, r.load = notClosed, l
	return r, nil
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store/redisstore"
	"github.com/redis/go-redis/v9"
)

// childEnv carries a child's configuration, as JSON, from the parent. A
// process started with it set runs managers for the parent instead of the
// benchmark.
const childEnv = "FUSEBOX_FLEET_CHILD"

// childConfig is what the parent tells a child process.
type childConfig struct {
	Redis    string `json:"redis"`
	First    int    `json:"first"`    // the fleet's index of the child's first manager
	Managers int    `json:"managers"` // how many managers the child runs
	Breakers int    `json:"breakers"` // shared breakers each manager registers
	// Faulted is how many breakers, from the first, the fault scripts may
	// fail: they open for Open, so that several open periods end within a
	// run. Every other breaker has the default Recover.
	Faulted      int           `json:"faulted"`
	TripFrom     int           `json:"tripFrom"` // breakers [TripFrom, TripTo) are tripped to time openings
	TripTo       int           `json:"tripTo"`
	Open         time.Duration `json:"open"`
	Resync       time.Duration `json:"resync"`       // manager.Options.Resync; zero: its default
	StoreTimeout time.Duration `json:"storeTimeout"` // manager.Options.StoreTimeout; zero: its default
	Workers      int           `json:"workers"`      // callers per manager while a fault runs
	Pace         time.Duration `json:"pace"`         // each caller's pause between sweeps of its breakers
}

// tripAfter is the strategy of every shared breaker: 5 failures in a row.
const tripAfter = 5

var errBoom = errors.New("fleet: the service failed")

func breakerName(i int) string { return fmt.Sprintf("b%05d", i) }

// breakerIndex is the inverse of breakerName; -1 for another name.
func breakerIndex(name string) int {
	s, ok := strings.CutPrefix(name, "b")
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return i
}

// member is one manager of a child, with its own Redis client.
type member struct {
	idx    int // in the fleet
	client *redis.Client
	count  *counter
	m      *manager.Manager
	bs     []*manager.Breaker
	events sync.WaitGroup
}

// wire writes the child's lines to the parent. Lines are written whole,
// from any goroutine.
type wire struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (w *wire) line(fields ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintln(w.w, fields...)
	w.w.Flush()
}

// childMain runs the child: it starts its managers, registers every
// breaker in each, says "ready" with each manager's registering time, and
// then does what the parent's lines on stdin ask until "quit" or the end of
// stdin.
func childMain(raw string) error {
	var cfg childConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return fmt.Errorf("reading %s: %w", childEnv, err)
	}
	out := &wire{w: bufio.NewWriter(os.Stdout)}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	members := make([]*member, cfg.Managers)
	ready := []any{"ready"}
	for i := range members {
		mb, took, err := startMember(cfg, cfg.First+i, logger, out)
		if err != nil {
			for _, m := range members[:i] {
				m.stop()
			}
			return err
		}
		members[i] = mb
		ready = append(ready, took.Nanoseconds())
	}
	defer func() {
		for _, m := range members {
			m.stop()
		}
	}()
	out.line(ready...)

	var run *faultRun
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		args := make([]int, len(f)-1)
		for i, s := range f[1:] {
			n, err := strconv.Atoi(s)
			if err != nil {
				return fmt.Errorf("command %q: %w", in.Text(), err)
			}
			args[i] = n
		}
		switch {
		case f[0] == "trip" && len(args) == 2:
			mb := members[args[0]-cfg.First]
			trip(mb.bs[args[1]])
		case f[0] == "fault" && len(args) == 3 && run == nil:
			run = startFault(cfg, members, args[0], args[1], time.Duration(args[2])*time.Millisecond, out)
		case f[0] == "stop" && run != nil:
			out.line("stopped", run.stop())
			run = nil
		case f[0] == "fail" && len(args) == 3:
			// the first manager reports args[2] failures of each breaker
			// in [args[0], args[1])
			forEach(1, members[0].bs[args[0]:args[1]], func(b *manager.Breaker) {
				for range args[2] {
					if p, err := b.Acquire(context.Background()); err == nil {
						p.Release(errBoom)
					}
				}
			})
			members[0].m.Sync()
			out.line("done")
		case f[0] == "reset" && len(args) == 2:
			forEach(1, members[0].bs[args[0]:args[1]], func(b *manager.Breaker) { _ = b.Reset() })
			members[0].m.Sync()
			out.line("done")
		case f[0] == "stats":
			out.line("stats", statsOf(members))
		case f[0] == "quit":
			return nil
		default:
			return fmt.Errorf("unknown command %q", in.Text())
		}
	}
	return in.Err()
}

// startMember starts manager idx with its own client and registers every
// breaker in it. It returns how long registering took, until Sync returned:
// until the store's answer for every breaker had been followed.
func startMember(cfg childConfig, idx int, logger *slog.Logger, out *wire) (*member, time.Duration, error) {
	mb := &member{idx: idx, count: newCounter()}
	mb.client = redis.NewClient(&redis.Options{Addr: cfg.Redis, ContextTimeoutEnabled: true})
	mb.client.AddHook(mb.count)
	st := redisstore.New(mb.client, redisstore.Options{})
	mb.m = manager.Start(manager.Options{Name: fmt.Sprintf("manager-%d", idx), Logger: logger.With("manager", idx), Resync: cfg.Resync, StoreTimeout: cfg.StoreTimeout})
	events, unsubscribe := mb.m.Subscribe(4096)
	mb.events.Add(1)
	go func() {
		defer mb.events.Done()
		for ev := range events {
			i := breakerIndex(ev.Name)
			if ev.Kind == manager.EventTransition && ev.Transition.To == breaker.Open && i >= cfg.TripFrom && i < cfg.TripTo {
				out.line("open", idx, i, ev.At.UnixNano())
			}
		}
	}()
	_ = unsubscribe // Stop closes the channel
	start := time.Now()
	mb.bs = make([]*manager.Breaker, cfg.Breakers)
	for i := range mb.bs {
		c := manager.Config{Strategy: breaker.Consecutive{Failures: tripAfter}, Store: st}
		if i < cfg.Faulted {
			c.Recover = recover.BasicTimeout{Open: cfg.Open}
		}
		b, err := mb.m.Register(breakerName(i), c)
		if err != nil {
			mb.stop()
			return nil, 0, fmt.Errorf("manager %d: %w", idx, err)
		}
		mb.bs[i] = b
	}
	mb.m.Sync()
	return mb, time.Since(start), nil
}

func (mb *member) stop() {
	mb.m.Stop()
	mb.events.Wait()
	mb.client.Close()
}

// trip makes the failing calls that open b.
func trip(b *manager.Breaker) {
	for range tripAfter {
		p, err := b.Acquire(context.Background())
		if err != nil {
			return
		}
		p.Release(errBoom)
	}
}

// forEach calls fn for every breaker of bs from workers goroutines.
func forEach(workers int, bs []*manager.Breaker, fn func(*manager.Breaker)) {
	var wg sync.WaitGroup
	var next atomic.Int64
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(bs) {
					return
				}
				fn(bs[i])
			}
		}()
	}
	wg.Wait()
}

// faultRun is a fault script running in a child: every manager calls the
// breakers [from, to) from Workers goroutines, each sweeping its share of
// them and pausing Pace between sweeps; the service they call fails until
// failUntil, then answers.
type faultRun struct {
	members  []*member
	from, to int
	quit     chan struct{}
	wg       sync.WaitGroup
}

func startFault(cfg childConfig, members []*member, from, to int, fail time.Duration, out *wire) *faultRun {
	r := &faultRun{members: members, from: from, to: to, quit: make(chan struct{})}
	failUntil := time.Now().Add(fail)
	workers := min(max(cfg.Workers, 1), to-from)
	for _, mb := range members {
		for w := range workers {
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				for {
					for i := from + w; i < to; i += workers {
						call(mb.bs[i], i, failUntil, out)
					}
					select {
					case <-r.quit:
						return
					case <-time.After(cfg.Pace):
					}
				}
			}()
		}
	}
	return r
}

// call makes one call through b to the service, which fails until
// failUntil. A call that reached the service while it failed, and every
// trial call, is reported to the parent with the instant its permit was
// granted: "call BREAKER PROBE OK UNIXNANO".
func call(b *manager.Breaker, i int, failUntil time.Time, out *wire) {
	p, err := b.Acquire(context.Background())
	if err != nil {
		return
	}
	at := time.Now()
	failing := at.Before(failUntil)
	if failing {
		p.Release(errBoom)
	} else {
		p.Release(nil)
	}
	if failing || p.Probe() {
		out.line("call", i, b2i(p.Probe()), b2i(!failing), at.UnixNano())
	}
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// stop ends the callers and returns how many of the run's breakers are not
// closed, summed over the child's managers.
func (r *faultRun) stop() int {
	close(r.quit)
	r.wg.Wait()
	n := 0
	for _, mb := range r.members {
		for _, b := range mb.bs[r.from:r.to] {
			if b.State() != breaker.Closed {
				n++
			}
		}
	}
	return n
}

// childStats is what a child says of itself on "stats".
type childStats struct {
	Sent        map[string]int64 `json:"sent"`        // commands its clients sent, by kind
	StoreErrors uint64           `json:"storeErrors"` // failed store calls, over every breaker
	StoreDown   int              `json:"storeDown"`   // breakers on their fallback now
	Dropped     uint64           `json:"dropped"`     // events the subscription lost
	CPU         float64          `json:"cpu"`         // the process's CPU seconds so far
}

func statsOf(members []*member) string {
	s := childStats{Sent: map[string]int64{}, CPU: processCPU()}
	for _, mb := range members {
		for k, v := range mb.count.snapshot() {
			s.Sent[k] += v
		}
		for _, b := range mb.bs {
			st := b.Stats()
			s.StoreErrors += st.StoreErrors
			s.Dropped += st.DroppedEvents
			if st.StoreDown {
				s.StoreDown++
			}
		}
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// copyLines copies r to w line by line, each prefixed, and at most limit
// lines; it counts the rest.
func copyLines(w io.Writer, r io.Reader, prefix string, limit int) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		if n++; n <= limit {
			fmt.Fprintf(w, "%s%s\n", prefix, sc.Text())
		}
	}
	if n > limit {
		fmt.Fprintf(w, "%s(%d more lines)\n", prefix, n-limit)
	}
}

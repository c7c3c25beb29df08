// Command shared shows one breaker shared by a fleet: three replicas of a
// service, each with its own manager and its own store client, call one
// failing dependency through a breaker named "inventory" that they share.
//
// The failures of all three count together, so the breaker opens for the
// whole fleet after five failures, not five per replica; when the open
// period ends, the replicas make one trial call between them, and its
// success closes the breaker everywhere.
//
// It shares the breaker through Redis when REDIS_URL is set (for example
// redis://127.0.0.1:6379/0) or when redis-server is on PATH (it then starts
// one on a free loopback port for the run), and through the in-memory store
// otherwise, which shares breakers between the managers of one process.
//
//	go run ./examples/shared
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	fbrecover "github.com/fusebox-go/fusebox/recover" // not recover: the name would hide the builtin recover()
	"github.com/fusebox-go/fusebox/store"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

const replicas = 3

func main() {
	if err := run(os.Stdout, os.Getenv("REDIS_URL"), true); err != nil {
		fmt.Fprintln(os.Stderr, "shared:", err)
		os.Exit(1)
	}
}

// backend is where the replicas' breakers keep their shared state.
type backend struct {
	name      string
	newStore  func() (store.Store, func()) // a store for one replica, and its cleanup
	closeDown func()
}

// pickBackend chooses Redis at redisURL, a redis-server started from PATH
// (when startRedis is set), or the in-memory store.
func pickBackend(redisURL string, startRedis bool) (*backend, error) {
	if redisURL != "" {
		opts, err := redis.ParseURL(redisURL)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		return redisBackend("Redis at "+opts.Addr+" (REDIS_URL)", opts, func() {}), nil
	}
	if bin, err := exec.LookPath("redis-server"); err == nil && startRedis {
		addr, stop, err := startRedisServer(bin)
		if err != nil {
			return nil, err
		}
		return redisBackend("Redis, a redis-server started on "+addr+" for this run", &redis.Options{Addr: addr}, stop), nil
	}
	mem := store.NewMemory(nil)
	return &backend{
		name:      "the in-memory store (set REDIS_URL or install redis-server to share through Redis)",
		newStore:  func() (store.Store, func()) { return mem, func() {} },
		closeDown: func() {},
	}, nil
}

func redisBackend(name string, opts *redis.Options, stop func()) *backend {
	// A fresh prefix per run, so that a shared Redis holds no state of an
	// earlier run.
	prefix := "fusebox-example-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	return &backend{
		name: name,
		newStore: func() (store.Store, func()) {
			// Every store call must end at its deadline, which go-redis
			// honours only with ContextTimeoutEnabled.
			o := *opts
			o.ContextTimeoutEnabled = true
			c := redis.NewClient(&o)
			return redisstore.New(c, redisstore.Options{Prefix: prefix}), func() { c.Close() }
		},
		closeDown: stop,
	}
}

// startRedisServer starts redis-server on a free loopback port, without
// persistence, and returns its address and a function that stops it.
func startRedisServer(bin string) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "fusebox-redis-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		os.RemoveAll(dir)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.Contains(sc.Text(), "Ready to accept connections") {
				signalled = true
				ready <- true
			}
		}
		if !signalled {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			stop()
			return "", nil, errors.New("redis-server exited before it was ready")
		}
	case <-time.After(10 * time.Second):
		stop()
		return "", nil, errors.New("redis-server was not ready within 10s")
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), stop, nil
}

// service is the dependency: it fails until it is told to recover, and
// counts the calls of each replica.
type service struct {
	healthy atomic.Bool
	calls   [replicas]atomic.Int64
	trials  atomic.Int64 // calls that reached it once healthy, before a trial came back
	inTrial atomic.Bool
	during  atomic.Int64 // calls that arrived while the trial was in flight
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i, _ := strconv.Atoi(r.URL.Query().Get("replica"))
	s.calls[i].Add(1)
	if !s.healthy.Load() {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	if s.inTrial.Load() {
		s.during.Add(1)
	}
	if s.trials.Add(1) == 1 {
		// The first call after the recovery is slow, so that the others
		// would have time to pile on if the breaker let them.
		s.inTrial.Store(true)
		time.Sleep(200 * time.Millisecond)
		s.inTrial.Store(false)
	}
	fmt.Fprintln(w, "ok")
}

// replica is one process of the fleet: a manager, a store client, and the
// shared breaker.
type replica struct {
	id      int
	m       *manager.Manager
	b       *manager.Breaker
	cleanup func()
	probe   atomic.Bool // this replica made the trial call
}

func run(w io.Writer, redisURL string, startRedis bool) error {
	be, err := pickBackend(redisURL, startRedis)
	if err != nil {
		return err
	}
	defer be.closeDown()
	fmt.Fprintf(w, "Three replicas share the breaker \"inventory\" through %s.\n", be.name)
	fmt.Fprintln(w, "It opens after 5 failures in a row, counted across the fleet, for 500ms.")
	fmt.Fprintln(w)

	svc := &service{}
	srv := httptest.NewServer(svc)
	defer srv.Close()
	client := srv.Client()

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var fleet []*replica
	defer func() {
		for _, r := range fleet {
			r.m.Stop()
			r.cleanup()
		}
	}()
	for i := range replicas {
		st, cleanup := be.newStore()
		m := manager.Start(manager.Options{Logger: quiet})
		b, err := m.Register("inventory", manager.Config{
			Strategy: breaker.Consecutive{Failures: 5},
			Recover:  fbrecover.BasicTimeout{Open: 500 * time.Millisecond, ProbeTimeout: 5 * time.Second},
			Store:    st,
		})
		if err != nil {
			m.Stop()
			cleanup()
			return err
		}
		fleet = append(fleet, &replica{id: i, m: m, b: b, cleanup: cleanup})
	}

	// get is one request of replica id to the service.
	get := func(ctx context.Context, id int) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/?replica="+strconv.Itoa(id), nil)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	call := func(r *replica) error {
		return r.b.Do(context.Background(), func(ctx context.Context) error { return get(ctx, r.id) })
	}

	// Phase 1: the service fails. Each replica calls until its breaker
	// declines.
	fmt.Fprintln(w, "The service fails. Each replica calls it until its breaker declines:")
	var wg sync.WaitGroup
	for _, r := range fleet {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !errors.Is(call(r), breaker.ErrOpen) {
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	var total int64
	for i := range fleet {
		n := svc.calls[i].Load()
		total += n
		fmt.Fprintf(w, "  replica %d: %d calls reached the service, then declined\n", i, n)
	}
	fmt.Fprintf(w, "  the service saw %d failing calls in all (three separate breakers would have let %d through)\n", total, 3*5)
	for _, r := range fleet {
		if s := r.b.State(); s != breaker.Open {
			return fmt.Errorf("replica %d is %v, not open", r.id, s)
		}
	}
	fmt.Fprintln(w, "  every replica's breaker is open")
	fmt.Fprintln(w)

	// Phase 2: the service recovers. The replicas keep calling; when the
	// open period ends, one call goes through as the trial.
	svc.healthy.Store(true)
	fmt.Fprintln(w, "The service recovers. Each replica keeps calling every 10ms:")
	deadline := time.Now().Add(10 * time.Second)
	for _, r := range fleet {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				p, err := r.b.Acquire(context.Background())
				if err == nil {
					if p.Probe() {
						r.probe.Store(true)
					}
					p.Release(get(context.Background(), r.id))
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	for _, r := range fleet {
		if r.probe.Load() {
			fmt.Fprintf(w, "  replica %d made the trial call; it succeeded after 200ms\n", r.id)
		}
	}
	fmt.Fprintf(w, "  trial calls while the trial was in flight: %d\n", svc.during.Load())
	for _, r := range fleet {
		deadline := time.Now().Add(5 * time.Second)
		for r.b.State() != breaker.Closed && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		fmt.Fprintf(w, "  replica %d: %v\n", r.id, r.b.State())
		if s := r.b.State(); s != breaker.Closed {
			return fmt.Errorf("replica %d is %v, not closed", r.id, s)
		}
	}
	return nil
}

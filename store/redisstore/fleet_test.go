package redisstore_test

// The fleet tests run fusebox as a fleet of replicas sharing breakers
// through a real redis-server: managers in this process with their own
// clients, and separate OS processes (this test binary run again in a
// helper mode, see helperMain).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// peer is one manager with its own Redis client.
type peer struct {
	m  *manager.Manager
	b  *manager.Breaker
	c  *redis.Client
	st *redisstore.Store
}

func startPeer(t testing.TB, addr, name string, cfg manager.Config, opts manager.Options) *peer {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	st := redisstore.New(c, redisstore.Options{})
	cfg.Store = st
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	m := manager.Start(opts)
	b, err := m.Register(name, cfg)
	if err != nil {
		m.Stop()
		c.Close()
		t.Fatalf("Register: %v", err)
	}
	r := &peer{m: m, b: b, c: c, st: st}
	t.Cleanup(r.stop)
	return r
}

func (r *peer) stop() {
	r.m.Stop()
	r.c.Close()
}

func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so within %v", what, within)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

var errBoom = errors.New("boom")

// Four managers with fifty goroutines each fail at once against one
// breaker with Consecutive{Failures: 1000} on Redis: no count is lost (the
// count in Redis is every failure that was not stale), and the breaker
// opens at the 1,000th: what got through after it is at most what was in
// flight.
func TestFleetNoLostCounts(t *testing.T) {
	srv := redistest.Start(t)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 1000}, Recover: recover.BasicTimeout{Open: time.Minute}}
	var rs []*peer
	for range 4 {
		rs = append(rs, startPeer(t, srv.Addr(), "svc", cfg, manager.Options{}))
	}
	var made atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, r := range rs {
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for {
					p, err := r.b.Acquire(context.Background())
					if err != nil {
						return
					}
					made.Add(1)
					p.Release(errBoom)
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	var stale uint64
	for _, r := range rs {
		st := r.b.Stats()
		stale += st.Stale
		require.Zero(t, st.StoreErrors, "store errors")
	}
	count, err := rs[0].c.Get(context.Background(), "fusebox:{svc}:failures").Int64()
	require.NoError(t, err)
	assert.Equal(t, made.Load()-int64(stale), count, "failures counted in Redis: every one released before the trip")
	assert.GreaterOrEqual(t, count, int64(1000))
	assert.LessOrEqual(t, count, int64(1000+4*50), "after the 1,000th failure only calls already in flight reach the store")
	for _, r := range rs {
		waitFor(t, 5*time.Second, "every peer is open", func() bool { return r.b.State() == breaker.Open })
	}
}

// A call through a healthy shared breaker sends Redis no command, counted
// on the server (INFO commandstats) and on the client (a hook).
func TestFleetHealthyCallsSendNoCommand(t *testing.T) {
	srv := redistest.Start(t)
	r := startPeer(t, srv.Addr(), "svc", manager.Config{}, manager.Options{Resync: time.Hour})
	hook := newKindHook()
	r.c.AddHook(hook)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()

	// Let the registration's reads settle: two equal readings 100ms apart.
	before := serverCommands(t, admin)
	for {
		time.Sleep(100 * time.Millisecond)
		now := serverCommands(t, admin)
		if now == before {
			break
		}
		before = now
	}
	hookedBefore := hook.sent()
	for range 10_000 {
		require.NoError(t, r.b.Do(context.Background(), func(context.Context) error { return nil }))
	}
	assert.Equal(t, before, serverCommands(t, admin), "commands Redis ran during 10,000 healthy calls (INFO excluded)")
	assert.Equal(t, hookedBefore, hook.sent(), "commands the peer's client sent during 10,000 healthy calls")
}

// serverCommands sums the calls of every command in INFO commandstats but
// INFO itself.
func serverCommands(t testing.TB, c *redis.Client) int64 {
	var total int64
	for _, n := range serverCommandsBy(t, c) {
		total += n
	}
	return total
}

// serverCommandsBy returns how many commands the server has run, by
// command, INFO excluded.
func serverCommandsBy(t testing.TB, c *redis.Client) map[string]int64 {
	info, err := c.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	by := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				by[strings.TrimPrefix(name, "cmdstat_")] += n
			}
		}
	}
	return by
}

// Redis killed under load and started again, empty: no panic and no
// goroutine left behind; while it is down each peer protects itself on
// its own state machine; once it is back the replicas share one breaker
// again.
func TestFleetRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Recover: recover.BasicTimeout{Open: 300 * time.Millisecond}}
	opts := manager.Options{Resync: 50 * time.Millisecond, StoreTimeout: 200 * time.Millisecond}
	a := startPeer(t, srv.Addr(), "svc", cfg, opts)
	b := startPeer(t, srv.Addr(), "svc", cfg, opts)

	srv.Kill()
	for _, r := range []*peer{a, b} {
		for i := 0; i < 10 && r.b.State() == breaker.Closed; i++ {
			_ = r.b.Do(context.Background(), func(context.Context) error { return errBoom })
		}
		assert.Equal(t, breaker.Open, r.b.State(), "the peer protects itself while Redis is down")
		assert.True(t, r.b.Stats().StoreDown)
	}

	srv.Restart()
	for _, r := range []*peer{a, b} {
		waitFor(t, 5*time.Second, "the peer finds Redis again", func() bool { return !r.b.Stats().StoreDown })
	}
	// Shared again: a trip in one peer opens the other.
	for _, r := range []*peer{a, b} {
		waitFor(t, 5*time.Second, "the local open period ends", func() bool { return r.b.State() != breaker.Open })
		require.NoError(t, r.b.Reset())
	}
	for range 3 {
		_ = a.b.Do(context.Background(), func(context.Context) error { return errBoom })
	}
	require.Equal(t, breaker.Open, a.b.State())
	waitFor(t, 5*time.Second, "the other peer follows through Redis", func() bool { return b.b.State() == breaker.Open })
}

// --- separate processes ---

const helperEnv = "FUSEBOX_FLEET_HELPER"

// helperConfig is what the parent test tells a helper process.
type helperConfig struct {
	Redis      string        `json:"redis"`
	Service    string        `json:"service"`
	Shared     bool          `json:"shared"`
	Goroutines int           `json:"goroutines"`
	Failures   int           `json:"failures"`
	Open       time.Duration `json:"open"`
	// Until says when a goroutine stops: "declined" after 20 declines in a
	// row, "success" after its first successful call.
	Until string `json:"until"`
	// SlowStart, when set, runs the helper of TestFleetProcessesSlowStart
	// instead (slowStartHelper), in the role Role.
	SlowStart time.Duration `json:"slow_start"`
	Role      string        `json:"role"`
	// Name is the helper's manager.Options.Name: each process of a
	// fleet on one host has its own (the default, the host name, is the
	// same for all of them).
	Name string `json:"name"`
}

// helperMain runs a peer as a separate process: it calls the service
// through a breaker named "svc" from Goroutines goroutines and prints how
// many calls it made and how many were declined.
func helperMain() int {
	var cfg helperConfig
	if err := json.Unmarshal([]byte(os.Getenv(helperEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	if cfg.SlowStart > 0 {
		return slowStartHelper(cfg)
	}
	c := redis.NewClient(&redis.Options{Addr: cfg.Redis, ContextTimeoutEnabled: true})
	defer c.Close()
	m := manager.Start(manager.Options{Logger: quiet, Name: cfg.Name})
	defer m.Stop()
	mc := manager.Config{
		Strategy: breaker.Consecutive{Failures: cfg.Failures},
		Recover:  recover.BasicTimeout{Open: cfg.Open, ProbeTimeout: 10 * time.Second},
	}
	if cfg.Shared {
		mc.Store = redisstore.New(c, redisstore.Options{})
	}
	b, err := m.Register("svc", mc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	// Ready: wait for the parent's go, so that every process starts at once.
	fmt.Println("ready")
	if _, err := fmt.Scanln(new(string)); err != nil {
		fmt.Fprintln(os.Stderr, "helper: waiting for go:", err)
		return 2
	}
	client := &http.Client{Timeout: 10 * time.Second}
	// call makes one call through the breaker. The request says whether
	// its permit is a probe and when it was granted (on the host's clock,
	// which the parent shares), so that the service can tell a call let
	// through before the fleet opened, however late it arrives on a loaded
	// machine, from one let through while it probes.
	call := func() error {
		p, err := b.Acquire(context.Background())
		if err != nil {
			return err
		}
		req, err := http.NewRequest(http.MethodGet, cfg.Service, nil)
		if err != nil {
			p.Release(err)
			return err
		}
		req.Header.Set("X-Probe", strconv.FormatBool(p.Probe()))
		req.Header.Set("X-Admitted", strconv.FormatInt(time.Now().UnixNano(), 10))
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode >= 500 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		p.Release(err)
		return err
	}
	var calls, declined atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(20 * time.Second)
	for range cfg.Goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for inARow := 0; time.Now().Before(deadline); {
				err := call()
				switch {
				case errors.Is(err, breaker.ErrOpen):
					declined.Add(1)
					if inARow++; cfg.Until == "declined" && inARow >= 20 {
						return
					}
					time.Sleep(time.Millisecond)
				case err == nil && cfg.Until == "success":
					calls.Add(1)
					return
				default:
					calls.Add(1)
					inARow = 0
				}
			}
		}()
	}
	wg.Wait()
	st := b.Stats()
	fmt.Printf("calls=%d declined=%d store_errors=%d\n", calls.Load(), declined.Load(), st.StoreErrors)
	return 0
}

// syncBuffer collects a helper's output while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runHelpers starts n helper processes, starts their calls together once
// all are ready, and waits for them.
func runHelpers(t *testing.T, n int, cfg helperConfig) {
	t.Helper()
	var cmds []*exec.Cmd
	var outs []*syncBuffer
	var gos []io.WriteCloser
	for i := range n {
		cfg.Name = fmt.Sprintf("helper-%d", i)
		env, err := json.Marshal(cfg)
		require.NoError(t, err)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+string(env))
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		in, err := cmd.StdinPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		cmds, outs, gos = append(cmds, cmd), append(outs, out), append(gos, in)
	}
	// Every helper has registered its breaker: start them together.
	for i, out := range outs {
		waitFor(t, 30*time.Second, fmt.Sprintf("helper %d is ready", i), func() bool { return strings.Contains(out.String(), "ready") })
	}
	for _, in := range gos {
		_, _ = io.WriteString(in, "go\n")
		in.Close()
	}
	for i, cmd := range cmds {
		err := cmd.Wait()
		t.Logf("helper %d: %s", i, strings.TrimSpace(strings.TrimPrefix(outs[i].String(), "ready\n")))
		require.NoError(t, err, "helper %d", i)
	}
}

// Four processes share a breaker with Consecutive{Failures: 5} in front of
// a failing HTTP service, each calling in a loop: the service sees at most
// 5 + 4 calls before every process declines. Unshared, it sees 20.
func TestFleetProcessesTripTogether(t *testing.T) {
	srv := redistest.Start(t)
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			var hits atomic.Int64
			svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.WriteHeader(http.StatusInternalServerError)
			}))
			defer svc.Close()
			require.NoError(t, redis.NewClient(&redis.Options{Addr: srv.Addr()}).FlushAll(context.Background()).Err())
			runHelpers(t, 4, helperConfig{Redis: srv.Addr(), Service: svc.URL, Shared: shared, Goroutines: 1, Failures: 5, Open: time.Minute, Until: "declined"})
			if shared {
				assert.GreaterOrEqual(t, hits.Load(), int64(5))
				assert.LessOrEqual(t, hits.Load(), int64(5+4), "calls that reached the service")
			} else {
				assert.Equal(t, int64(20), hits.Load(), "calls that reached the service through four unshared breakers")
			}
		})
	}
}

// When the open period ends, four processes with fifty goroutines each make
// exactly one trial call between them, and no process lets a call through
// while it is in flight. A call let through before the fleet opened may
// reach the service late (a loaded machine delays requests by hundreds of
// milliseconds): it is no trial, and the service tells it by the instant its
// permit was granted.
func TestFleetProcessesOneProbe(t *testing.T) {
	srv := redistest.Start(t)
	var failing atomic.Bool
	failing.Store(true)
	var mu sync.Mutex
	var trials int
	var during []string          // calls let through while the trial was in flight (the first ten)
	var probeFrom, probeTo int64 // when the trial's permit was granted, and when the trial ended
	probed := false
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		probe := r.Header.Get("X-Probe") == "true"
		admitted, err := strconv.ParseInt(r.Header.Get("X-Admitted"), 10, 64)
		if err != nil {
			panic(fmt.Sprintf("a call without its permit's instant: %v", err))
		}
		mu.Lock()
		switch {
		case probe:
			trials++
		case probeFrom != 0 && admitted >= probeFrom && (probeTo == 0 || admitted <= probeTo) && len(during) < 10:
			during = append(during, fmt.Sprintf("a call granted %v after the trial's permit", time.Duration(admitted-probeFrom)))
		}
		if probe && probeFrom != 0 && probeTo == 0 && len(during) < 10 {
			during = append(during, fmt.Sprintf("a second trial, granted %v after the first", time.Duration(admitted-probeFrom)))
		}
		mu.Unlock()
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			go func() { // the fleet is open well before the period ends
				time.Sleep(300 * time.Millisecond)
				failing.Store(false)
			}()
			return
		}
		mu.Lock()
		if !probe || probed || probeFrom != 0 {
			mu.Unlock()
			return // a call from before the fleet opened, or after it closed again
		}
		probeFrom = admitted
		mu.Unlock()
		time.Sleep(300 * time.Millisecond) // a slow trial: others must wait, not call
		mu.Lock()
		probeTo, probed = time.Now().UnixNano(), true
		mu.Unlock()
	}))
	defer svc.Close()
	runHelpers(t, 4, helperConfig{Redis: srv.Addr(), Service: svc.URL, Shared: true, Goroutines: 50, Failures: 1, Open: time.Second, Until: "success"})
	mu.Lock()
	defer mu.Unlock()
	assert.True(t, probed, "the trial call was made")
	assert.Equal(t, 1, trials, "trial calls made by four processes of fifty goroutines")
	assert.Empty(t, during, "calls let through while the trial was in flight")
}

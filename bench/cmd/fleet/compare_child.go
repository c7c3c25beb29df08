package main

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store/redisstore"
	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
)

// compareChildEnv carries a side-by-side child's configuration, as JSON,
// from the parent (see compare.go).
const compareChildEnv = "FUSEBOX_FLEET_COMPARE_CHILD"

// The breakers compared, in the order of the table.
const (
	libFusebox       = "fusebox"                             // a manager.Breaker per process
	libFuseboxShared = "fusebox shared"                      // the same, shared through redisstore
	libFuseboxSlow   = "fusebox shared (SlowStart 5s)"       // the same, and a slow start of the fleet's
	libGobreaker     = "gobreaker"                           // a gobreaker.CircuitBreaker per process
	libGobreakerDist = "gobreaker DistributedCircuitBreaker" // on a Redis SharedDataStore
	libFailsafe      = "failsafe-go"                         // a failsafe-go circuit breaker per process
)

var compareLibs = []string{libFusebox, libFuseboxShared, libFuseboxSlow, libGobreaker, libGobreakerDist, libFailsafe}

// libShared says whether lib keeps its state in Redis.
func libShared(lib string) bool {
	return lib == libFuseboxShared || lib == libFuseboxSlow || lib == libGobreakerDist
}

// compareChildConfig is what the parent tells a side-by-side child.
type compareChildConfig struct {
	Lib     string        `json:"lib"`
	Index   int           `json:"index"`
	Service string        `json:"service"` // the service's base URL
	Redis   string        `json:"redis"`   // for the shared breakers
	Pace    time.Duration `json:"pace"`    // one call each Pace
	Open    time.Duration `json:"open"`    // the open period
	// LockRetry is how long the gobreaker store waits, on average,
	// before it asks again for a lock another process holds.
	LockRetry time.Duration `json:"lockRetry"`
}

// compareName is the breaker's name in every library.
const compareName = "service"

// guard is one library's breaker around a call to the service.
type guard interface {
	// call runs do through the breaker: ran says whether do ran, trial
	// whether it ran as the breaker's trial call.
	call(do func() error) (ran, trial bool)
	// sent is the Redis commands the breaker's client has sent so far.
	sent() int64
	// storeErrors is the store calls that failed so far.
	storeErrors() int64
	close()
}

// childStatsCompare is what a side-by-side child says on "stop".
type childStatsCompare struct {
	// Through, Direct and Own are the healthy calls timed while the
	// parent measured: through the breaker, without it, and the
	// breaker's own part of a call through it (the call less the time
	// inside the service call), in nanoseconds.
	Through []int64 `json:"through"`
	Direct  []int64 `json:"direct"`
	Own     []int64 `json:"own"`
	// Sent is the Redis commands the breaker's client sent while the
	// parent measured.
	Sent        int64 `json:"sent"`
	Calls       int64 `json:"calls"`       // calls asked of the breaker
	Declined    int64 `json:"declined"`    // calls the breaker did not let through
	StoreErrors int64 `json:"storeErrors"` // store calls that failed, over the whole run
	// StoreErrorsEarly is those that failed before the healthy window,
	// while the children started.
	StoreErrorsEarly int64 `json:"storeErrorsEarly"`
}

// compareChildMain runs a side-by-side child: it builds its breaker, says
// "ready", and then does what the parent's lines ask:
//
//   - go: call the service through the breaker every Pace, and once
//     directly beside each of those calls;
//   - time: from now on, time the calls and count the Redis commands;
//   - quiet: stop timing, and stop the direct calls;
//   - stop: stop calling and say "stats" with the figures;
//   - quit (or the end of stdin): exit.
//
// While it calls, it reports each of its breaker's openings ("open
// UNIXNANO") and each trial call ("trial UNIXNANO OK") as they happen.
func compareChildMain(raw string) error {
	var cfg compareChildConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return fmt.Errorf("reading %s: %w", compareChildEnv, err)
	}
	out := &wire{w: bufio.NewWriter(os.Stdout)}
	opened := func(at time.Time) { out.line("open", at.UnixNano()) }
	g, err := newGuard(cfg, opened)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.Lib, err)
	}
	defer g.close()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	get := func(path string) error {
		resp, err := client.Get(cfg.Service + path)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("service answered %d", resp.StatusCode)
		}
		return nil
	}
	out.line("ready")

	var l *caller
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch cmd := strings.TrimSpace(in.Text()); {
		case cmd == "go" && l == nil:
			l = startCaller(cfg.Pace, g, get, out)
		case cmd == "time" && l != nil:
			l.timing(true)
		case cmd == "quiet" && l != nil:
			l.timing(false)
			l.direct.Store(false)
		case cmd == "stop" && l != nil:
			st := l.stop()
			b, _ := json.Marshal(st)
			out.line("stats", string(b))
			l = nil
		case cmd == "quit":
			return nil
		default:
			return fmt.Errorf("unknown command %q", cmd)
		}
	}
	return in.Err()
}

// caller is the calling goroutine of a child.
type caller struct {
	g      guard
	quit   chan struct{}
	done   chan struct{}
	direct atomic.Bool

	mu        sync.Mutex
	timed     bool
	sentSince int64 // the commands sent when timing began
	st        childStatsCompare
}

func startCaller(pace time.Duration, g guard, get func(string) error, out *wire) *caller {
	c := &caller{g: g, quit: make(chan struct{}), done: make(chan struct{})}
	c.direct.Store(true)
	go func() {
		defer close(c.done)
		tick := time.NewTicker(pace)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-c.quit:
				return
			case <-tick.C:
			}
			// The direct call goes first every other time, so that
			// neither kind always finds the connection warm.
			var direct time.Duration
			directFirst := n%2 == 0
			timeDirect := func() {
				if c.direct.Load() {
					t0 := time.Now()
					_ = get("/direct")
					direct = time.Since(t0)
				}
			}
			if directFirst {
				timeDirect()
			}
			var inside time.Duration
			var failed bool
			t0 := time.Now()
			ran, trial := g.call(func() error {
				t1 := time.Now()
				err := get("/through")
				inside = time.Since(t1)
				failed = err != nil
				return err
			})
			total := time.Since(t0)
			if trial {
				out.line("trial", t0.UnixNano(), b2i(!failed))
			}
			if !directFirst {
				timeDirect()
			}
			c.mu.Lock()
			c.st.Calls++
			if !ran {
				c.st.Declined++
			}
			if c.timed && ran && !failed && direct > 0 {
				c.st.Through = append(c.st.Through, total.Nanoseconds())
				c.st.Own = append(c.st.Own, (total - inside).Nanoseconds())
				c.st.Direct = append(c.st.Direct, direct.Nanoseconds())
			}
			c.mu.Unlock()
		}
	}()
	return c
}

// timing turns the timing of calls, and the count of commands, on or off.
func (c *caller) timing(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if on && !c.timed {
		c.sentSince = c.g.sent()
		c.st.StoreErrorsEarly = c.g.storeErrors()
	}
	if !on && c.timed {
		c.st.Sent += c.g.sent() - c.sentSince
	}
	c.timed = on
}

func (c *caller) stop() childStatsCompare {
	c.timing(false)
	close(c.quit)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.StoreErrors = c.g.storeErrors()
	return c.st
}

// newGuard builds the breaker of cfg.Lib: 5 failures in a row open it,
// for cfg.Open, after which one trial call decides. opened is called at
// each of its openings.
func newGuard(cfg compareChildConfig, opened func(time.Time)) (guard, error) {
	switch cfg.Lib {
	case libFusebox, libFuseboxShared, libFuseboxSlow:
		return newFuseboxGuard(cfg, opened)
	case libGobreaker:
		g := &gobreakerGuard{}
		g.cb = gobreaker.NewCircuitBreaker[struct{}](gobreakerCompareSettings(cfg, opened))
		g.state = g.cb.State
		g.execute = g.cb.Execute
		return g, nil
	case libGobreakerDist:
		client := redis.NewClient(&redis.Options{Addr: cfg.Redis, ContextTimeoutEnabled: true})
		count := newCounter()
		client.AddHook(count)
		st := &redisSharedStore{client: client, retry: cfg.LockRetry, held: map[string]string{}}
		dcb, err := gobreaker.NewDistributedCircuitBreaker[struct{}](st, gobreakerCompareSettings(cfg, opened))
		if err != nil {
			client.Close()
			return nil, err
		}
		// Inside the call, the embedded CircuitBreaker holds the state
		// the call was admitted in (read from Redis under the lock);
		// dcb.State() would take the lock again.
		return &gobreakerGuard{state: dcb.CircuitBreaker.State, execute: dcb.Execute, client: client, count: count}, nil
	case libFailsafe:
		cb := circuitbreaker.NewBuilder[any]().
			WithFailureThreshold(tripAfter).
			WithSuccessThreshold(1).
			WithDelay(cfg.Open).
			OnOpen(func(circuitbreaker.StateChangedEvent) { opened(time.Now()) }).
			Build()
		return &failsafeGuard{cb: cb, ex: failsafe.With[any](cb)}, nil
	}
	return nil, fmt.Errorf("unknown library %q (want one of %s)", cfg.Lib, strings.Join(compareLibs, ", "))
}

type fuseboxGuard struct {
	m      *manager.Manager
	b      *manager.Breaker
	client *redis.Client
	count  *counter
	events sync.WaitGroup
}

func newFuseboxGuard(cfg compareChildConfig, opened func(time.Time)) (*fuseboxGuard, error) {
	g := &fuseboxGuard{}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	g.m = manager.Start(manager.Options{Name: fmt.Sprintf("replica-%d", cfg.Index), Logger: logger})
	events, _ := g.m.Subscribe(256) // Stop closes the channel
	g.events.Add(1)
	go func() {
		defer g.events.Done()
		for ev := range events {
			if ev.Kind == manager.EventTransition && ev.Transition.To == breaker.Open {
				opened(ev.At)
			}
		}
	}()
	c := manager.Config{Strategy: breaker.Consecutive{Failures: tripAfter}, Recover: recover.BasicTimeout{Open: cfg.Open}}
	if cfg.Lib == libFuseboxSlow {
		c.SlowStart = 5 * time.Second
	}
	if libShared(cfg.Lib) {
		g.client = redis.NewClient(&redis.Options{Addr: cfg.Redis, ContextTimeoutEnabled: true})
		g.count = newCounter()
		g.client.AddHook(g.count)
		c.Store = redisstore.New(g.client, redisstore.Options{})
	}
	b, err := g.m.Register(compareName, c)
	if err != nil {
		g.close()
		return nil, err
	}
	g.b = b
	g.m.Sync()
	return g, nil
}

func (g *fuseboxGuard) call(do func() error) (ran, trial bool) {
	p, err := g.b.Acquire(context.Background())
	if err != nil {
		return false, false
	}
	p.Release(do())
	return true, p.Probe()
}

func (g *fuseboxGuard) sent() int64 { return sumCounts(g.count) }

func (g *fuseboxGuard) storeErrors() int64 { return int64(g.b.Stats().StoreErrors) }

func (g *fuseboxGuard) close() {
	g.m.Stop()
	g.events.Wait()
	if g.client != nil {
		g.client.Close()
	}
}

// gobreakerCompareSettings is the gobreaker configuration of the
// comparison: 5 failures in a row, cfg.Open open, one trial call (a zero
// MaxRequests), counts never cleared while closed.
func gobreakerCompareSettings(cfg compareChildConfig, opened func(time.Time)) gobreaker.Settings {
	return gobreaker.Settings{
		Name:        compareName,
		Timeout:     cfg.Open,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= tripAfter },
		OnStateChange: func(_ string, _, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				opened(time.Now())
			}
		},
	}
}

// gobreakerGuard is a gobreaker CircuitBreaker, or a
// DistributedCircuitBreaker with its Redis client.
type gobreakerGuard struct {
	cb      *gobreaker.CircuitBreaker[struct{}]
	state   func() gobreaker.State
	execute func(func() (struct{}, error)) (struct{}, error)
	client  *redis.Client
	count   *counter
	errs    atomic.Int64
}

func (g *gobreakerGuard) call(do func() error) (ran, trial bool) {
	var callErr error
	_, err := g.execute(func() (struct{}, error) {
		ran, trial = true, g.state() == gobreaker.StateHalfOpen
		callErr = do()
		return struct{}{}, callErr
	})
	// An error that is neither the call's nor the breaker's refusal is
	// the store's: the lock, or the state's read or write.
	if err != nil && err != callErr && !errors.Is(err, gobreaker.ErrOpenState) && !errors.Is(err, gobreaker.ErrTooManyRequests) {
		g.errs.Add(1)
	}
	return ran, trial
}

func (g *gobreakerGuard) sent() int64 { return sumCounts(g.count) }

func (g *gobreakerGuard) storeErrors() int64 { return g.errs.Load() }

func (g *gobreakerGuard) close() {
	if g.client != nil {
		g.client.Close()
	}
}

type failsafeGuard struct {
	cb circuitbreaker.CircuitBreaker[any]
	ex failsafe.Executor[any]
}

func (g *failsafeGuard) call(do func() error) (ran, trial bool) {
	_ = g.ex.Run(func() error {
		ran, trial = true, g.cb.IsHalfOpen()
		return do()
	})
	return ran, trial
}

func (g *failsafeGuard) sent() int64        { return 0 }
func (g *failsafeGuard) storeErrors() int64 { return 0 }
func (g *failsafeGuard) close()             {}

func sumCounts(c *counter) int64 {
	if c == nil {
		return 0
	}
	var n int64
	for _, v := range c.snapshot() {
		n += v
	}
	return n
}

// redisSharedStore is a gobreaker.SharedDataStore on one Redis, of the
// shape gobreaker's own Redis store has: the state of a breaker is one
// string key written whole (GET, SET), and the lock
// DistributedCircuitBreaker takes around each call is a key set with SET
// NX and a 5s expiry, which Lock waits for, and Unlock deletes with a
// script only if this process still holds it. gobreaker's own store waits
// with redsync's defaults (a random 50 to 250ms between attempts, 32
// attempts); this one asks again after a random half to one and a half
// retry (2ms by default), which makes a contended lock pass sooner, at
// the price of more commands.
type redisSharedStore struct {
	client *redis.Client
	retry  time.Duration

	mu   sync.Mutex
	held map[string]string // lock name -> this process's token
}

// lockExpiry is the lock's expiry, and how long Lock waits for it.
const lockExpiry = 5 * time.Second

var errLockWait = errors.New("gobreaker store: the lock was not free within 5s")

// unlockScript deletes the lock only if it holds the caller's token.
var unlockScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// Lock implements gobreaker.SharedDataStore.
func (s *redisSharedStore) Lock(name string) error {
	var raw [12]byte
	_, _ = crand.Read(raw[:])
	token := hex.EncodeToString(raw[:])
	ctx := context.Background()
	deadline := time.Now().Add(lockExpiry)
	for {
		ok, err := s.client.SetNX(ctx, name, token, lockExpiry).Result()
		if err != nil {
			return err
		}
		if ok {
			s.mu.Lock()
			s.held[name] = token
			s.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			return errLockWait
		}
		time.Sleep(s.retry/2 + rand.N(s.retry+1))
	}
}

// Unlock implements gobreaker.SharedDataStore.
func (s *redisSharedStore) Unlock(name string) error {
	s.mu.Lock()
	token, ok := s.held[name]
	delete(s.held, name)
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("gobreaker store: %s is not locked here", name)
	}
	n, err := unlockScript.Run(context.Background(), s.client, []string{name}, token).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("gobreaker store: the lock %s expired while held", name)
	}
	return nil
}

// GetData implements gobreaker.SharedDataStore: nil for a state not
// written yet.
func (s *redisSharedStore) GetData(name string) ([]byte, error) {
	b, err := s.client.Get(context.Background(), name).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return b, err
}

// SetData implements gobreaker.SharedDataStore.
func (s *redisSharedStore) SetData(name string, data []byte) error {
	return s.client.Set(context.Background(), name, data, 0).Err()
}

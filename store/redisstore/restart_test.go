package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

// replica is one process of a fleet in the restart test: a manager with
// its own Redis client, and its shared breakers.
type replica struct {
	id       int
	client   *redis.Client
	m        *manager.Manager
	breakers map[string]*sharedUnderLoad
	gate     sync.RWMutex // held for reading by each call; the test holds it to pause the load
	watcher  sync.WaitGroup

	mu        sync.Mutex
	chainErrs []string
	orderErrs []string
	lost      map[string]int             // store_lost events per breaker
	restored  map[string]int             // store_restored events per breaker
	left      map[string][]breaker.Cause // per breaker, the cause of each transition out of closed
	events    int
	recent    []string // the last events, for failure messages
	log       tailLog
}

// tailLog keeps the last lines the manager logged, for failure messages.
type tailLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *tailLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.TrimRight(string(p), "\n"))
	if len(l.lines) > 30 {
		l.lines = l.lines[1:]
	}
	return len(p), nil
}

func (l *tailLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// sharedUnderLoad is what the callers of one breaker counted.
type sharedUnderLoad struct {
	b                             *manager.Breaker
	attempts, inflight            atomic.Int64
	successes, failures, declined atomic.Int64
}

// restartTestSpecs are the shared breakers of each replica.
var restartTestSpecs = []struct {
	name string
	cfg  func() manager.Config
}{
	{"svc", func() manager.Config {
		return manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Recover: recover.BasicTimeout{Open: 50 * time.Millisecond, ProbeTimeout: 200 * time.Millisecond}}
	}},
	{"svc-window", func() manager.Config {
		return manager.Config{
			Strategy: breaker.TimeWindow{Rate: 0.5, Period: 200 * time.Millisecond, Buckets: 4, MinCalls: 10},
			Recover:  recover.BasicTimeout{Open: 30 * time.Millisecond, ProbeTimeout: 200 * time.Millisecond},
		}
	}},
}

func newReplica(t *testing.T, id int, addr string) *replica {
	t.Helper()
	r := &replica{
		id:       id,
		breakers: map[string]*sharedUnderLoad{},
		lost:     map[string]int{},
		restored: map[string]int{},
		left:     map[string][]breaker.Cause{},
	}
	// Everything made here is released when the test ends, failed or not:
	// the manager (and the goroutine following its events) first, then the
	// client, whose pool would go on dialling a killed server.
	r.client = redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		DialTimeout:           200 * time.Millisecond,
		ReadTimeout:           200 * time.Millisecond,
		WriteTimeout:          200 * time.Millisecond,
		MaxRetries:            -1,
		PoolSize:              1000, // go-redis slows its dialling down after PoolSize failed dials in a row
	})
	t.Cleanup(func() { _ = r.client.Close() })
	st := redisstore.New(r.client, redisstore.Options{Prefix: "restart"})
	r.m = manager.Start(manager.Options{
		Logger:       slog.New(slog.NewTextHandler(&r.log, nil)),
		StoreTimeout: 500 * time.Millisecond,
		Resync:       50 * time.Millisecond,
	})
	events, _ := r.m.Subscribe(1 << 16) // closed by Stop
	r.watcher.Add(1)
	go func() {
		defer r.watcher.Done()
		r.follow(events)
	}()
	t.Cleanup(r.stop)
	for _, s := range restartTestSpecs {
		cfg := s.cfg()
		cfg.Store = st
		b, err := r.m.Register(s.name, cfg)
		require.NoError(t, err, "replica %d: Register(%q)", id, s.name)
		r.breakers[s.name] = &sharedUnderLoad{b: b}
	}
	return r
}

// stop stops the replica's manager and waits for the goroutine following
// its events, whose channel Stop closes. Calling it again does nothing.
func (r *replica) stop() {
	r.m.Stop()
	r.watcher.Wait()
}

// follow checks that each breaker's events form one chain: each change of
// state starts where the last ended, with the generation one further. An
// event of the store lost or restored stays in the state the breaker is
// in, at its generation; those that do not are kept apart in orderErrs.
// It also counts the store's outages.
func (r *replica) follow(events <-chan manager.Event) {
	type pos struct {
		st  breaker.State
		gen uint64
	}
	last := map[string]pos{}
	for e := range events {
		r.mu.Lock()
		r.events++
		r.recent = append(r.recent, fmt.Sprintf("%s %v %v gen=%d outcome=%v at=%s", e.Name, e.Transition, e.Cause, e.Gen, e.Outcome, e.At.Format("15:04:05.000000")))
		if len(r.recent) > 40 {
			r.recent = r.recent[1:]
		}
		p, ok := last[e.Name]
		if !ok {
			p = pos{breaker.Closed, 1}
		}
		switch e.Kind {
		case manager.EventStoreLost, manager.EventStoreRestored:
			if e.Kind == manager.EventStoreLost {
				r.lost[e.Name]++
			} else {
				r.restored[e.Name]++
			}
			if e.Transition != (breaker.Transition{}) {
				r.chainErrs = append(r.chainErrs, fmt.Sprintf("%s: a %v event carries the transition %v", e.Name, e.Kind, e.Transition))
			}
			if e.Gen != p.gen {
				r.orderErrs = append(r.orderErrs, fmt.Sprintf("%s: %v at gen %d, published when the breaker's last event had left it %v at gen %d",
					e.Name, e.Kind, e.Gen, p.st, p.gen))
			}
		default:
			if e.Transition.From != p.st || e.Gen != p.gen+1 {
				r.chainErrs = append(r.chainErrs, fmt.Sprintf("%s: %v (%v, gen %d) after %v at gen %d", e.Name, e.Transition, e.Cause, e.Gen, p.st, p.gen))
			}
			if e.Transition.From == e.Transition.To && e.Cause != breaker.CauseForceOpen {
				// A store lost or restored is its own kind of event, never
				// a from==to transition.
				r.chainErrs = append(r.chainErrs, fmt.Sprintf("%s: %v with cause %v does not change the state", e.Name, e.Transition, e.Cause))
			}
			if e.Transition.From == breaker.Closed {
				r.left[e.Name] = append(r.left[e.Name], e.Cause)
			}
			last[e.Name] = pos{e.Transition.To, e.Gen}
		}
		r.mu.Unlock()
	}
}

// history returns the last events seen, one a line.
func (r *replica) history() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.recent, "\n")
}

// counts returns the outages announced for breaker name so far.
func (r *replica) counts(name string) (lost, restored int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost[name], r.restored[name]
}

// leftClosed returns the causes of breaker name's transitions out of the
// closed state so far, in order.
func (r *replica) leftClosed(name string) []breaker.Cause {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]breaker.Cause(nil), r.left[name]...)
}

// call makes one call through s, counted, on a caller's goroutine.
func (r *replica) call(s *sharedUnderLoad, rng *rand.Rand) {
	r.gate.RLock()
	defer r.gate.RUnlock()
	var callErr error
	if rng.IntN(100) < 30 {
		callErr = errBoomRestart
	}
	if _, err := s.once(callErr, rng.IntN(4) == 0); err != nil {
		panic(fmt.Sprintf("replica %d: Acquire on %s: %v", r.id, s.b.Name(), err))
	}
}

// once makes one call through s that ends with callErr, counted. It
// reports whether the call went through, and returns Acquire's error other
// than a declined call's.
func (s *sharedUnderLoad) once(callErr error, yield bool) (bool, error) {
	p, err := s.b.Acquire(context.Background())
	switch {
	case errors.Is(err, breaker.ErrOpen):
		s.attempts.Add(1)
		s.declined.Add(1)
		return false, nil
	case err != nil:
		return false, err
	}
	s.attempts.Add(1)
	s.inflight.Add(1)
	if yield {
		runtime.Gosched()
	}
	p.Release(callErr)
	if classify.Default(callErr) == classify.Success {
		s.successes.Add(1)
	} else {
		s.failures.Add(1)
	}
	s.inflight.Add(-1)
	return true, nil
}

var errBoomRestart = errors.New("service failed")

// waitUntil polls cond until it holds, failing the test after limit with
// what and the replicas' recent events.
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool, reps ...*replica) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			var b strings.Builder
			if len(reps) > 0 {
				// What the store holds of each breaker, as the test
				// gives up.
				st := redisstore.New(reps[0].client, redisstore.Options{Prefix: "restart"})
				for name := range reps[0].breakers {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					status, err := st.Status(ctx, []string{name})
					cancel()
					fmt.Fprintf(&b, "the store's %s: %+v %v\n", name, status, err)
				}
			}
			for _, r := range reps {
				fmt.Fprintf(&b, "replica %d:", r.id)
				for name, sl := range r.breakers {
					lost, restored := r.counts(name)
					st := sl.b.Stats()
					fmt.Fprintf(&b, " %s %v down=%v errors=%d lost=%d restored=%d;", name, st.State, st.StoreDown, st.StoreErrors, lost, restored)
				}
				fmt.Fprintf(&b, " last events:\n%s\nlast log lines:\n%s\n", r.history(), r.log.String())
			}
			t.Fatalf("still waiting after %v for %s\n%s", limit, what, b.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// restartRounds is how many times the test restarts Redis: three, or ten
// with FUSEBOX_LONG set.
func restartRounds() (rounds int, load time.Duration) {
	if v := os.Getenv("FUSEBOX_LONG"); v != "" && v != "0" {
		return 10, 2 * time.Second
	}
	return 3, 150 * time.Millisecond
}

// Redis is killed and started again, empty, three times while two
// replicas (two managers, each with its own client) call through two
// shared breakers with 16 goroutines per breaker and replica. Nothing
// panics and no call is left blocked; during each outage every breaker
// announces store_lost and runs on its local state machine; after each
// restart every breaker announces store_restored, and the fleet is
// reconciled: a trip through one replica shows on the other, and a probe
// through that one closes the breaker on both. Each breaker's events form
// one chain, the counts add up, and nothing is left running once the
// managers are stopped and the clients closed.
func TestRedisRestartsUnderLoad(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	srv := redistest.Start(t)
	rounds, loadFor := restartRounds()
	reps := []*replica{newReplica(t, 0, srv.Addr()), newReplica(t, 1, srv.Addr())}
	inspect := redisstore.New(reps[0].client, redisstore.Options{Prefix: "restart"})

	stop := make(chan struct{})
	var callers sync.WaitGroup
	var calls atomic.Int64
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, %d restarts", seed, rounds)
	const perBreaker = 16
	for _, r := range reps {
		for _, s := range restartTestSpecs {
			sl := r.breakers[s.name]
			for w := range perBreaker {
				callers.Add(1)
				go func() {
					defer callers.Done()
					rng := rand.New(rand.NewPCG(seed, uint64(r.id*1000+w)))
					for {
						select {
						case <-stop:
							return
						default:
						}
						r.call(sl, rng)
						calls.Add(1)
					}
				}()
			}
		}
	}
	paused := false
	pause := func() {
		for _, r := range reps {
			r.gate.Lock()
		}
		paused = true
	}
	resume := func() {
		paused = false
		for _, r := range reps {
			r.gate.Unlock()
		}
	}
	// endLoad stops the callers and waits for them; it runs as a cleanup
	// too, before the replicas' (cleanups run last first), so that a test
	// that failed half-way leaves no caller behind, paused or not.
	var endOnce sync.Once
	endLoad := func() (blocked bool) {
		endOnce.Do(func() {
			close(stop)
			if paused {
				resume()
			}
			done := make(chan struct{})
			go func() { callers.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				blocked = true
			}
		})
		return blocked
	}
	t.Cleanup(func() {
		if endLoad() {
			t.Error("callers still blocked 10s after the load stopped")
		}
	})
	// progress waits until the callers have made n more calls.
	progress := func(what string, n int64) {
		t.Helper()
		from := calls.Load()
		waitUntil(t, 10*time.Second, what, func() bool { return calls.Load()-from >= n }, reps...)
	}

	for round := 1; round <= rounds; round++ {
		roundStart := time.Now()
		time.Sleep(loadFor) // the load runs meanwhile
		progress(fmt.Sprintf("round %d: calls before the kill", round), 100)
		killed := time.Now()
		srv.Kill()
		for _, r := range reps {
			for name, sl := range r.breakers {
				waitUntil(t, 5*time.Second, fmt.Sprintf("round %d: replica %d's %s to announce store_lost", round, r.id, name), func() bool {
					lost, restored := r.counts(name)
					return lost > restored && sl.b.Stats().StoreDown
				}, reps...)
			}
		}
		lostAfter := time.Since(killed)
		// The breakers go on deciding while Redis is down.
		progress(fmt.Sprintf("round %d: calls while Redis is down", round), 100)

		srv.Restart()
		restarted := time.Now()
		for _, r := range reps {
			for name, sl := range r.breakers {
				waitUntil(t, 10*time.Second, fmt.Sprintf("round %d: replica %d's %s to announce store_restored", round, r.id, name), func() bool {
					lost, restored := r.counts(name)
					return restored == lost && !sl.b.Stats().StoreDown
				}, reps...)
			}
		}
		restoredAfter := time.Since(restarted)
		progress(fmt.Sprintf("round %d: calls after the restart", round), 100)
		reconStart := time.Now()

		// Reconciled: with the load paused, the replicas settle on one
		// state (a half-open replica is sent a good call, the probe), a
		// trip through replica 0 reaches replica 1, and good calls close
		// the breaker on both again.
		pause()
		sa, sb := reps[0].breakers["svc"], reps[1].breakers["svc"]
		a, b := sa.b, sb.b
		settle := func(what string) {
			t.Helper()
			waitUntil(t, 10*time.Second, fmt.Sprintf("round %d: %s", round, what), func() bool {
				for _, x := range []*sharedUnderLoad{sa, sb} {
					if x.b.State() == breaker.HalfOpen {
						_, err := x.once(nil, false)
						require.NoError(t, err)
					}
				}
				st, err := inspect.Status(context.Background(), []string{"svc"})
				return err == nil && !st[0].Opened() && st[0].Open == 0 && st[0].Probe == 0 &&
					a.State() == breaker.Closed && b.State() == breaker.Closed &&
					!a.Stats().StoreDown && !b.Stats().StoreDown
			}, reps...)
		}
		// The trip must be the test's own, made through replica 0 while it
		// reaches the store: the load paused may have left replica 0 open
		// already (its own trip, or one it followed), and a loaded machine
		// may make a store call of replica 0 time out during the test's
		// (the breaker then trips on its local fallback, which the fleet
		// does not hear of: announced by a store_lost event). Either way,
		// settle and trip again.
		var left []breaker.Cause
		for attempt := 1; ; attempt++ {
			require.LessOrEqual(t, attempt, 5, "round %d: no trip through replica 0 reached the store in five attempts", round)
			settle("svc closed on both replicas and in Redis")
			lost0, _ := reps[0].counts("svc")
			left = reps[1].leftClosed("svc")
			for i := 0; i < 3 && a.State() == breaker.Closed; i++ {
				_, err := sa.once(errBoomRestart, false)
				require.NoError(t, err)
			}
			// Open, or already past its short open period on a loaded
			// machine: out of closed either way.
			require.NotEqual(t, breaker.Closed, a.State(), "round %d: replica 0 after three failures", round)
			reps[0].m.Sync() // the opening's store call has ended and been applied
			if lost, _ := reps[0].counts("svc"); lost == lost0 && !a.Stats().StoreDown {
				break
			}
			t.Logf("round %d: attempt %d: replica 0 lost the store while it tripped; again", round, attempt)
		}
		// Replica 1, which the paused load no longer calls, follows the
		// trip out of closed: to open, or to half-open if it heard of the
		// opening after its period (a loaded machine may delay a watch
		// message or the resync that long, so its open state may be too
		// short-lived to be seen by polling State).
		waitUntil(t, 5*time.Second, fmt.Sprintf("round %d: replica 1 to follow replica 0's trip", round), func() bool {
			return len(reps[1].leftClosed("svc")) > len(left)
		}, reps...)
		assert.Equal(t, breaker.CauseShared, reps[1].leftClosed("svc")[len(left)], "round %d: how replica 1 left closed after replica 0's trip", round)
		settle("good calls to close svc on both replicas after the open period")
		resume()
		t.Logf("round %d: store lost %v after the kill, restored %v after the restart; reconciled in %v; %v in all",
			round, lostAfter.Round(time.Millisecond), restoredAfter.Round(time.Millisecond), time.Since(reconStart).Round(time.Millisecond), time.Since(roundStart).Round(time.Millisecond))
	}

	time.Sleep(loadFor)
	if endLoad() {
		t.Fatal("callers still blocked 10s after the load stopped")
	}
	for _, r := range reps {
		for name, sl := range r.breakers {
			waitUntil(t, 5*time.Second, fmt.Sprintf("replica %d's %s to end its last outage", r.id, name), func() bool {
				lost, restored := r.counts(name)
				return lost == restored && !sl.b.Stats().StoreDown
			}, reps...)
			st := sl.b.Stats()
			assert.Equal(t, uint64(sl.attempts.Load()), st.Calls, "replica %d, %s: attempts and Stats.Calls", r.id, name)
			assert.Equal(t, [3]uint64{uint64(sl.successes.Load()), uint64(sl.failures.Load()), uint64(sl.declined.Load())},
				[3]uint64{st.Successes, st.Failures, st.Declined}, "replica %d, %s: successes, failures, declined", r.id, name)
			assert.Zero(t, st.DroppedEvents, "replica %d, %s: dropped events", r.id, name)
			lost, restored := r.counts(name)
			assert.GreaterOrEqual(t, lost, rounds, "replica %d, %s: outages announced", r.id, name)
			assert.Equal(t, lost, restored, "replica %d, %s: every outage announced ends", r.id, name)
		}
		r.stop()
		assert.Empty(t, r.chainErrs, "replica %d: event chains", r.id)
		assert.Empty(t, r.orderErrs, "replica %d: store_lost and store_restored events in the order of the breaker's transitions", r.id)
		require.NoError(t, r.client.Close())
		t.Logf("replica %d: %d events", r.id, r.events)
	}
	t.Logf("FIGURES redis-restarts: restarts=%d calls=%d goroutines=%d", rounds, calls.Load(), 2*len(restartTestSpecs)*perBreaker)
	srv.Kill()
	goleak.VerifyNone(t, leaks)
}

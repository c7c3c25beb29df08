package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/internal/sharepolicy"
	"github.com/fusebox-go/fusebox/store"
	"github.com/fusebox-go/fusebox/store/redisstore"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// The Redis scripts follow the store's rules: random sequences of
// operations (every operation of store.Store, time passing, the store
// losing its data) are played on a real redis-server and on store.Memory,
// which runs the rules as one pure function, and every reply, every status
// read after an operation and every change announced must be the same.
// Durations compare within a tolerance: Redis counts them down in real
// time, and the Memory's mock clock follows the real time that passed,
// plus the time a sequence lets pass (a lapse shortens every expiry in
// Redis by as much).
//
// FUSEBOX_RULES_SEQUENCES sets how many sequences (10,000 by default, 500
// with -short); FUSEBOX_RULES_SEED=n plays sequence n alone, printing it.
func TestScriptsFollowTheStoreRules(t *testing.T) {
	srv := redistest.Start(t)
	client := newClient(t, srv)
	rs := redisstore.New(client, redisstore.Options{})

	n := 10000
	if testing.Short() {
		n = 500
	}
	if v := os.Getenv("FUSEBOX_RULES_SEQUENCES"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err, "FUSEBOX_RULES_SEQUENCES")
	}
	first := 0
	if v := os.Getenv("FUSEBOX_RULES_SEED"); v != "" {
		var err error
		first, err = strconv.Atoi(v)
		require.NoError(t, err, "FUSEBOX_RULES_SEED")
		n = first + 1
	}

	changes := newChangeLog()
	ctx, cancel := context.WithCancel(context.Background())
	watching := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var once sync.Once
		_ = rs.Watch(ctx, func() { once.Do(func() { close(watching) }) }, changes.add)
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-watching:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not subscribe within 10s")
	}

	// The sequences are independent (a breaker and a Memory each): eight
	// play at once, so that the round trips of one overlap another's.
	seqs := make(chan uint64)
	var ops atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := range seqs {
				ops.Add(int64(newConformance(t, client, rs, changes, seq).play()))
			}
		}()
	}
	for seq := first; seq < n && !t.Failed(); seq++ {
		seqs <- uint64(seq)
	}
	close(seqs)
	wg.Wait()
	t.Logf("%d sequences, %d operations: every reply, status and change the same", n-first, ops.Load())
}

// conformance is one sequence: the breaker it plays on, in Redis and in a
// Memory of its own, and what it did so far.
type conformance struct {
	t       *testing.T
	seed    uint64
	rnd     *rand.Rand
	client  *redis.Client
	rs      *redisstore.Store
	mem     *store.Memory
	clk     *clock.Mock
	name    string
	policy  store.Policy
	start   time.Time // the real instant the sequence began
	base    time.Time // the mock clock's instant then: Redis's time
	lapsed  time.Duration
	log     []string
	redis   *changeLog
	memLog  []store.Change
	memMu   sync.Mutex
	memStop context.CancelFunc
	memDone chan struct{}
	epoch   uint64 // the epoch the last status read said
}

const tolerance = 250 * time.Millisecond

func newConformance(t *testing.T, client *redis.Client, rs *redisstore.Store, changes *changeLog, seed uint64) *conformance {
	c := &conformance{t: t, seed: seed, rnd: rand.New(rand.NewPCG(seed, 0x5eed)), client: client, rs: rs,
		name: fmt.Sprintf("rules-%d-%d", os.Getpid(), seed), redis: changes}
	tm, err := client.Time(context.Background()).Result()
	if err != nil {
		t.Errorf("TIME: %v", err)
		tm = time.Now()
	}
	c.clk = clock.NewMock()
	c.clk.Set(tm)
	c.base, c.start = tm, time.Now()
	c.policy = c.drawPolicy()
	c.newMemory()
	return c
}

// newMemory starts the sequence's Memory, empty, watched.
func (c *conformance) newMemory() {
	if c.memStop != nil {
		c.memStop()
		<-c.memDone
	}
	c.mem = store.NewMemory(c.clk)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	c.memStop, c.memDone = cancel, make(chan struct{})
	go func(mem *store.Memory, done chan struct{}) {
		defer close(done)
		_ = mem.Watch(ctx, func() { close(ready) }, func(ch store.Change) {
			c.memMu.Lock()
			c.memLog = append(c.memLog, ch)
			c.memMu.Unlock()
		})
	}(c.mem, c.memDone)
	<-ready
}

func (c *conformance) drawPolicy() store.Policy {
	q := []int{0, 0, 2, 3}[c.rnd.IntN(4)]
	if c.rnd.IntN(3) == 0 {
		return store.Policy{Rate: 0.5, Period: time.Hour, Buckets: 4, MinCalls: 1 + c.rnd.IntN(4), Quorum: q}
	}
	return store.Policy{Failures: 1 + c.rnd.IntN(4), Quorum: q}
}

// now moves the Memory's clock to the real time that passed since the
// sequence began, plus the lapses.
func (c *conformance) now() {
	c.clk.Set(c.base.Add(time.Since(c.start) + c.lapsed))
}

// play plays one sequence and returns how many operations it made.
func (c *conformance) play() int {
	defer func() {
		c.memStop()
		<-c.memDone
		_ = c.client.Del(context.Background(), c.keys()...).Err()
	}()
	c.logf("seed %d, breaker %q, policy %+v", c.seed, c.name, c.policy)
	steps := 4 + c.rnd.IntN(20)
	for i := 0; i < steps; i++ {
		if !c.step() {
			return i
		}
		if c.t.Failed() {
			return i
		}
	}
	c.compareChanges()
	return steps
}

func (c *conformance) keys() []string {
	var keys []string
	for _, f := range []string{"failures", "window", "open", "probe", "epoch", "reporters", "opener", "since"} {
		keys = append(keys, c.rs.Key(c.name, f))
	}
	return keys
}

func (c *conformance) logf(format string, args ...any) {
	c.log = append(c.log, fmt.Sprintf(format, args...))
}

func (c *conformance) fail(format string, args ...any) {
	c.t.Helper()
	c.t.Errorf("sequence %d (replay: FUSEBOX_RULES_SEED=%d): %s\n%s", c.seed, c.seed, fmt.Sprintf(format, args...), strings.Join(c.log, "\n"))
}

func (c *conformance) epochArg() uint64 {
	e := c.epoch
	switch c.rnd.IntN(8) {
	case 0:
		return e + 1
	case 1:
		return e + 2
	case 2:
		return e + 3 + uint64(c.rnd.IntN(4))
	case 3:
		if e > 0 {
			return e - 1
		}
	}
	return e
}

func (c *conformance) durationArg(zero bool) time.Duration {
	ds := []time.Duration{3 * time.Second, 10 * time.Second, 40 * time.Second}
	if zero && c.rnd.IntN(4) == 0 {
		return 0
	}
	return ds[c.rnd.IntN(len(ds))]
}

func (c *conformance) reasonArg() store.Reason {
	switch c.rnd.IntN(4) {
	case 0:
		return store.Reason{}
	case 1:
		return store.Reason{By: "web-" + strconv.Itoa(c.rnd.IntN(3)), Why: "dial tcp: connection refused\nretry"}
	case 2:
		return store.Reason{By: "web-1", Why: strings.Repeat("é", 150)}
	}
	return store.Reason{By: "web-2"}
}

func (c *conformance) successes() []int64 {
	out := make([]int64, c.rnd.IntN(3))
	for i := range out {
		out[i] = int64(c.rnd.IntN(3))
	}
	return out
}

// step makes one operation on both stores and compares the replies and
// the statuses after it; false ends the sequence early (a window's bucket
// changed between the two stores' clocks).
func (c *conformance) step() bool {
	ctx := context.Background()
	p := c.policy
	p.Reporter = []string{"a", "b", "c"}[c.rnd.IntN(3)]
	if p.Rate > 0 && sharepolicy.Bucket(&p, c.clk.Now()) != sharepolicy.Bucket(&p, c.base.Add(time.Since(c.start))) {
		return false
	}
	c.now()
	switch k := c.rnd.IntN(20); {
	case k < 5:
		f, s := int64(1+c.rnd.IntN(3)), c.successes()
		c.logf("record failure %d, successes %v, reporter %s", f, s, p.Reporter)
		rv, rerr := c.rs.RecordFailure(ctx, c.name, p, f, s)
		mv, merr := c.mem.RecordFailure(ctx, c.name, p, f, s)
		c.same("RecordFailure", rv, rerr, mv, merr)
	case k < 7:
		s := c.successes()
		c.logf("record success, successes %v, reporter %s", s, p.Reporter)
		rv, rerr := c.rs.RecordSuccess(ctx, c.name, p, s)
		mv, merr := c.mem.RecordSuccess(ctx, c.name, p, s)
		c.same("RecordSuccess", rv, rerr, mv, merr)
	case k < 9:
		e, d, why := c.epochArg(), c.durationArg(true), c.reasonArg()
		c.logf("open from epoch %d for %v, %q", e, d, why)
		rs, rok, rerr := c.rs.Open(ctx, c.name, e, d, why)
		ms, mok, merr := c.mem.Open(ctx, c.name, e, d, why)
		c.same("Open", [2]any{rs, rok}, rerr, [2]any{ms, mok}, merr)
	case k < 12:
		tok, e, d := "t"+strconv.Itoa(c.rnd.IntN(2)), c.epochArg(), c.durationArg(false)
		c.logf("acquire %s in epoch %d for %v", tok, e, d)
		rok, rs, rerr := c.rs.AcquireProbe(ctx, c.name, tok, e, d)
		mok, ms, merr := c.mem.AcquireProbe(ctx, c.name, tok, e, d)
		c.same("AcquireProbe", [2]any{rs, rok}, rerr, [2]any{ms, mok}, merr)
	case k < 14:
		tok, e := "t"+strconv.Itoa(c.rnd.IntN(2)), c.epochArg()
		o := []classify.Outcome{classify.Success, classify.Failure, classify.Ignore}[c.rnd.IntN(3)]
		d, why := c.durationArg(o != classify.Failure), c.reasonArg()
		c.logf("resolve %s in epoch %d: %v, reopen %v, %q", tok, e, o, d, why)
		rs, rok, rerr := c.rs.Resolve(ctx, c.name, tok, e, o, d, why)
		ms, mok, merr := c.mem.Resolve(ctx, c.name, tok, e, o, d, why)
		c.same("Resolve", [2]any{rs, rok}, rerr, [2]any{ms, mok}, merr)
	case k < 15 && c.rnd.IntN(2) == 0:
		c.logf("reset")
		rs, rerr := c.rs.Reset(ctx, c.name)
		ms, merr := c.mem.Reset(ctx, c.name)
		c.same("Reset", rs, rerr, ms, merr)
	case k < 15 && c.rnd.IntN(2) == 0:
		e := c.epochArg()
		c.logf("half-open in epoch %d", e)
		rs, rok, rerr := c.rs.HalfOpen(ctx, c.name, e)
		ms, mok, merr := c.mem.HalfOpen(ctx, c.name, e)
		c.same("HalfOpen", [2]any{rs, rok}, rerr, [2]any{ms, mok}, merr)
	case k < 16:
		c.logf("force open")
		rs, rerr := c.rs.ForceOpen(ctx, c.name)
		ms, merr := c.mem.ForceOpen(ctx, c.name)
		c.same("ForceOpen", rs, rerr, ms, merr)
	case k < 17:
		// The store loses its data: a restart, a FLUSHALL.
		c.logf("the store loses its data")
		c.compareChanges()
		if err := c.client.Del(ctx, c.keys()...).Err(); err != nil {
			c.fail("DEL: %v", err)
		}
		c.newMemory()
	default:
		c.lapse()
	}
	c.now()
	rst, rerr := c.rs.Status(ctx, []string{c.name})
	mst, merr := c.mem.Status(ctx, []string{c.name})
	c.same("Status", rst, rerr, mst, merr)
	if len(mst) == 1 {
		c.epoch = mst[0].Epoch
	}
	return true
}

// lapse lets time pass: to just before or just after an expiry the
// status shows, or past the run's memory.
func (c *conformance) lapse() {
	st, _ := c.mem.Status(context.Background(), []string{c.name})
	var ends []time.Duration
	for _, d := range []time.Duration{st[0].Open, st[0].Probe, st[0].SlowStart} {
		if d > 0 {
			ends = append(ends, d)
		}
	}
	d := store.DefaultFailureTTL + 2*time.Second
	if len(ends) > 0 && c.rnd.IntN(4) != 0 {
		d = ends[c.rnd.IntN(len(ends))] + time.Second
		if c.rnd.IntN(2) == 0 && d > 3*time.Second {
			d -= 2 * time.Second
		}
	}
	if c.policy.Rate > 0 {
		d = min(d, 2*time.Second) // the window's buckets follow Redis's clock
	}
	c.logf("lapse %v", d)
	c.lapsed += d
	ctx := context.Background()
	for _, k := range c.keys() {
		ttl, err := c.client.PTTL(ctx, k).Result()
		switch {
		case err != nil:
		case ttl < 0:
		case ttl <= d:
			err = c.client.Del(ctx, k).Err()
		default:
			err = c.client.PExpire(ctx, k, ttl-d).Err()
		}
		if err != nil {
			c.fail("lapse of %s: %v", k, err)
		}
	}
}

// same compares what Redis and the Memory answered to op.
func (c *conformance) same(op string, r any, rerr error, m any, merr error) {
	c.t.Helper()
	if rerr != nil || merr != nil {
		c.fail("%s: Redis: %v, Memory: %v", op, rerr, merr)
		return
	}
	c.logf("    -> %+v", m)
	if !near(reflect.ValueOf(r), reflect.ValueOf(m)) {
		c.fail("%s answered differently:\n  Redis:  %+v\n  Memory: %+v", op, r, m)
	}
}

// near compares two values field by field, durations within tolerance.
func near(a, b reflect.Value) bool {
	if a.Kind() == reflect.Interface {
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		a, b = a.Elem(), b.Elem()
	}
	if a.Type() != b.Type() {
		return false
	}
	if a.Type() == reflect.TypeOf(time.Duration(0)) {
		d := time.Duration(a.Int() - b.Int())
		return d <= tolerance && d >= -tolerance && (a.Int() == 0) == (b.Int() == 0)
	}
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			if !near(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !near(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	}
	return a.Equal(b)
}

// compareChanges compares the changes both stores announced so far of the
// sequence's breaker, waiting a bounded while for Redis's to arrive.
func (c *conformance) compareChanges() {
	c.memMu.Lock()
	want := c.memLog
	c.memLog = nil
	c.memMu.Unlock()
	got := c.redis.take(c.name, len(want), 5*time.Second)
	for i := range want {
		want[i].Name = c.name
	}
	if !near(reflect.ValueOf(got), reflect.ValueOf(want)) {
		c.fail("the changes announced differ:\n  Redis:  %+v\n  Memory: %+v", got, want)
	}
}

// changeLog keeps the changes a Redis watch delivered, by breaker.
type changeLog struct {
	mu    sync.Mutex
	cond  *sync.Cond
	names map[string][]store.Change
}

func newChangeLog() *changeLog {
	l := &changeLog{names: map[string][]store.Change{}}
	l.cond = sync.NewCond(&l.mu)
	return l
}

func (l *changeLog) add(ch store.Change) {
	l.mu.Lock()
	l.names[ch.Name] = append(l.names[ch.Name], ch)
	l.mu.Unlock()
	l.cond.Broadcast()
}

// take returns the changes of name delivered so far, once there are at
// least n of them or within has passed, and forgets them.
func (l *changeLog) take(name string, n int, within time.Duration) []store.Change {
	deadline := time.Now().Add(within)
	stop := time.AfterFunc(within, l.cond.Broadcast)
	defer stop.Stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.names[name]) < n && time.Now().Before(deadline) {
		l.cond.Wait()
	}
	// A change announced after n (there should be none) shows too.
	out := l.names[name]
	delete(l.names, name)
	return out
}

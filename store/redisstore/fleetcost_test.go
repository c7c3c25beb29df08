package redisstore_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

// kindHook counts the commands a client sends, by kind: a script by its
// name (redisstore.ScriptKinds), anything else by its command's name (a
// pipeline counts each of its commands).
type kindHook struct {
	mu     sync.Mutex
	counts map[string]int64
}

func newKindHook() *kindHook { return &kindHook{counts: map[string]int64{}} }

// sent returns the commands sent so far, of every kind.
func (h *kindHook) sent() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var n int64
	for _, c := range h.counts {
		n += c
	}
	return n
}

func (h *kindHook) count(cmd redis.Cmder) {
	args := cmd.Args()
	kind := strings.ToLower(cmd.Name())
	if (kind == "evalsha" || kind == "eval") && len(args) > 1 {
		sha, _ := args[1].(string)
		if k, ok := redisstore.ScriptKinds[sha]; ok {
			kind = k
		} else {
			kind = "script"
		}
	}
	h.mu.Lock()
	h.counts[kind]++
	h.mu.Unlock()
}

func (h *kindHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *kindHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.count(cmd); return next(ctx, cmd) }
}
func (h *kindHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}

// everyMillisecond calls fn once a millisecond until ctx is done: a
// caller of the fleet tests.
func everyMillisecond(ctx context.Context, fn func()) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		fn()
	}
}

// countedFleet starts n managers named web-00, web-01, ..., each with its
// own client on addr and a hook counting what the client sends, with
// breaker name registered on each, and waits for each to follow the store.
func countedFleet(t *testing.T, addr, name string, cfg manager.Config, n int) ([]*peer, []*kindHook) {
	var peers []*peer
	var hooks []*kindHook
	for i := range n {
		p := startPeer(t, addr, name, cfg, manager.Options{Name: fmt.Sprintf("web-%02d", i)})
		h := newKindHook()
		p.c.AddHook(h)
		peers, hooks = append(peers, p), append(hooks, h)
	}
	for _, p := range peers {
		p.m.Sync()
	}
	return peers, hooks
}

// writes are the kinds of command that change a breaker's state in Redis.
var writes = map[string]bool{"failure": true, "window": true, "open": true, "lease": true, "verdict": true, "reset": true, "force": true, "success": true}

// fleetCounts sums the hooks' counts, writes only.
func fleetCounts(hooks []*kindHook) map[string]int64 {
	out := map[string]int64{}
	for _, h := range hooks {
		h.mu.Lock()
		for k, n := range h.counts {
			if writes[k] {
				out[k] += n
			}
		}
		h.mu.Unlock()
	}
	return out
}

func minus(a, b map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, n := range a {
		if d := n - b[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func total(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func show(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, m[k])
	}
	return b.String()
}

// What a fleet event costs Redis, whatever the number of processes: 32
// managers, each with its own client and name, call one breaker of
// Consecutive{5} every millisecond, with open periods of 200ms, on a real
// redis-server; a hook on each client counts the writes it sends, by
// kind. The dependency fails, then recovers.
//
// An opening costs one opening script, and at most one failure report per
// manager but for the at most k-1 reports whose reply came back short of
// the threshold (their process then reports the failures it folded
// meanwhile): the report whose reply shows the threshold crossed is a
// process's last in its epoch. So at most managers+k-1 failure reports
// and 4 other writes. A period end with a failed trial costs at most 3
// writes (the lease, its verdict, and one lease asked for in vain), on
// the mean of the period ends (each at most a quarter of the managers); the
// recovery at most 8.
//
// The bounds hold when every process hears a change within its lag (100ms
// at least): a phase in which this process (all 32 managers) did not run
// for 70ms in all, counting the stalls over 25ms the soak's stall meter
// sees, is reported, not judged. The race detector beside two CPU burners
// stalls it so now and then.
func TestFleetEventCost(t *testing.T) {
	srv := redistest.Start(t)
	const managers = 32
	cfg := manager.Config{
		Strategy: breaker.Consecutive{Failures: 5},
		Recover:  recover.BasicTimeout{Open: 200 * time.Millisecond, ProbeTimeout: time.Second},
	}
	peers, hooks := countedFleet(t, srv.Addr(), "cost", cfg, managers)
	var failing atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	stalls := &stallMeter{}
	wg.Add(1)
	go func() { defer wg.Done(); stalls.run(ctx) }()
	// judged says whether the phase from from to now ran without a stall.
	judged := func(what string, from time.Time) bool {
		if d := stalls.during(from, time.Now()); d > 70*time.Millisecond {
			t.Logf("%s: not judged, the process stalled for %v", what, d)
			return false
		}
		return true
	}
	for _, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			everyMillisecond(ctx, func() {
				_ = p.b.Do(ctx, func(context.Context) error {
					if failing.Load() {
						return errBoom
					}
					return nil
				})
			})
		}()
	}
	allIn := func(s breaker.State) func() bool {
		return func() bool {
			for _, p := range peers {
				if p.b.State() != s {
					return false
				}
			}
			return true
		}
	}
	state := func() string {
		n := map[breaker.State]int{}
		for _, p := range peers {
			n[p.b.State()]++
		}
		return fmt.Sprint(n)
	}

	time.Sleep(200 * time.Millisecond)
	healthy := fleetCounts(hooks)
	assert.Zero(t, total(healthy), "writes while healthy: %s", show(healthy))

	// The opening: the first failure to every manager open.
	openingFrom := time.Now()
	failing.Store(true)
	waitFor(t, 5*time.Second, "every manager open", allIn(breaker.Open))
	opened := fleetCounts(hooks)
	opening := minus(opened, healthy)
	t.Logf("the opening: %d writes (%s)", total(opening), show(opening))
	openingJudged := judged("the opening", openingFrom)

	// Period ends with failed trials: count over whole periods, from
	// each opening to the next.
	var ends []map[string]int64
	var endsJudged []bool
	openings := func() int64 {
		h := fleetCounts(hooks)
		return h["open"] + h["verdict"]
	}
	mark, markAt := fleetCounts(hooks), time.Now()
	for i := range 5 {
		was := openings()
		waitFor(t, 5*time.Second, "a failed trial reopens the fleet", func() bool { return openings() > was && allIn(breaker.Open)() })
		now := fleetCounts(hooks)
		ends = append(ends, minus(now, mark))
		t.Logf("period end %d: %d writes (%s)", i+1, total(ends[i]), show(ends[i]))
		endsJudged = append(endsJudged, judged(fmt.Sprintf("period end %d", i+1), markAt))
		mark, markAt = now, time.Now()
	}

	// The recovery: the next trial succeeds, and every manager closes.
	recoveryFrom := time.Now()
	failing.Store(false)
	before := fleetCounts(hooks)
	waitFor(t, 5*time.Second, "every manager closed", allIn(breaker.Closed))
	time.Sleep(300 * time.Millisecond) // and what follows the closing
	recovery := minus(fleetCounts(hooks), before)
	t.Logf("the recovery: %d writes (%s); the fleet now %s", total(recovery), show(recovery), state())

	if openingJudged {
		assert.LessOrEqual(t, opening["failure"], int64(managers+5-1), "failure reports of the opening: at most one per manager, and k-1")
		assert.LessOrEqual(t, total(opening)-opening["failure"], int64(4), "other writes of the opening: %s", show(opening))
	}
	// Each period end on a quiet machine costs 2 writes; under the race
	// detector beside CPU burners, a manager slow to run now and then asks
	// for a lease it would have heard of, so the bound is on the mean of
	// the judged ends, with none above a quarter of the fleet: a fleet
	// back to a lease per manager costs 32.
	var sum, judgedEnds int64
	for i, e := range ends {
		if i == 0 || !endsJudged[i] {
			continue // the first may hold the tail of the opening
		}
		sum, judgedEnds = sum+total(e), judgedEnds+1
		assert.LessOrEqual(t, total(e), int64(managers/4), "writes of period end %d: %s", i+1, show(e))
	}
	if judgedEnds > 0 {
		assert.LessOrEqual(t, float64(sum)/float64(judgedEnds), 3.0, "writes a period end, over the %d judged", judgedEnds)
	}
	if judged("the recovery", recoveryFrom) {
		assert.LessOrEqual(t, total(recovery), int64(8), "writes of the recovery: %s", show(recovery))
	}
}

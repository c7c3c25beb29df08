package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/store"
	"github.com/redis/go-redis/v9"
)

// Breaker is what the store holds of one breaker, read in one atomic step:
// what an operator inspects (List, Inspect), not what a manager follows
// (Status).
type Breaker struct {
	// Name is the breaker's name.
	Name string
	// Status is the breaker's shared state, as Store.Status reads it.
	store.Status
	// Holder is the token of the process holding the probe lease; empty
	// when no process holds it. Status.Probe is the lease's time left.
	// A manager's token is its process's name (manager.Options.Name), a
	// slash and a random part: see HolderName.
	Holder string
	// Window reports that the counts are a window policy's (the window
	// key); otherwise they are a consecutive policy's (the failures key).
	Window bool
	// Failures is the shared run of consecutive failures or, for a window
	// policy, the failures of every bucket the window key holds.
	Failures int64
	// Calls is the calls of every bucket the window key holds (window
	// policy only). The store does not record the window's length, so the
	// buckets it holds may include some older than the window: Calls and
	// Failures are at least the window's counts, never less.
	Calls int64
	// Processes is how many processes reported the failures counted, for
	// a breaker with a quorum (manager.Config.Quorum above 1): of the run,
	// or, for a window policy, of the reporters the store still holds
	// (at least those in the window); zero without a quorum.
	Processes int64
	// Reporters are the names of those processes (manager.Options.Name),
	// sorted; nil without a quorum.
	Reporters []string
	// At is when the breaker was read, on the store's clock (Redis's
	// TIME): every duration of Status counts from it, so that PeriodEnd
	// and Since are instants of one clock, the one that counts the
	// periods down.
	At time.Time
	// Since is when the breaker entered the state State reports, on the
	// store's clock; zero when the store does not say (see the since key
	// in docs/shared-state.md).
	Since time.Time
}

// PeriodEnd returns when the breaker's open period ends, and its next
// trial may start, on the store's clock: At plus what is left of the
// period. It is zero when no period runs: the breaker is closed, forced
// open (only a reset ends that), half-open or probing.
func (b Breaker) PeriodEnd() time.Time {
	if b.Forced || b.Open <= 0 || !b.Opened() {
		return time.Time{}
	}
	return b.At.Add(b.Open)
}

// HolderName returns the name of the process holding the probe lease: the
// Holder's token up to its last slash, as a manager makes it
// (manager.Options.Name); the whole token if it has none.
func (b Breaker) HolderName() string {
	if i := strings.LastIndexByte(b.Holder, '/'); i > 0 {
		return b.Holder[:i]
	}
	return b.Holder
}

// State returns the breaker's state for the fleet, as the store holds it:
// Open while the open period runs (or forced: see Forced), Probing while a
// process holds the probe lease, HalfOpen once the period is over and no
// process holds the lease, Closed in a closed epoch (counting failures or
// not).
func (b Breaker) State() breaker.State {
	switch {
	case !b.Opened():
		return breaker.Closed
	case b.Forced || b.Open > 0:
		return breaker.Open
	case b.Holder != "":
		return breaker.Probing
	}
	return breaker.HalfOpen
}

// inspectScript reads every key of one breaker at once, with the store's
// clock, so that a state is never pieced together from two epochs and its
// instants are of one clock.
//
// KEYS: epoch, open, probe, failures, window, reporters, opener, since.
// Returns {epoch, open_pttl, holder, probe_pttl, failures, window,
// reporters (their names), opener, time (TIME's seconds and
// microseconds), since}: a missing string is "", a missing hash an empty
// list.
var inspectScript = redis.NewScript(`
return {
  redis.call('GET', KEYS[1]) or '',
  redis.call('PTTL', KEYS[2]),
  redis.call('GET', KEYS[3]) or '',
  redis.call('PTTL', KEYS[3]),
  redis.call('GET', KEYS[4]) or '',
  redis.call('HGETALL', KEYS[5]),
  redis.call('HKEYS', KEYS[6]),
  redis.call('GET', KEYS[7]) or '',
  redis.call('TIME'),
  redis.call('GET', KEYS[8]) or ''
}
`)

// fields are the fields of a breaker's keys, in inspectScript's order.
//
// The since key, "epoch\nat_ms\nperiod_ms", says when (Unix
// milliseconds, on Redis's clock) the last script that changed the
// breaker's state in epoch ran, and the open period or the lease it
// began (0 for none): an opening, a failed probe, a closing, a reset, a
// forcing, a lease granted or given back. The breaker has been in its
// state since then or, half-open, since that period's or lease's end.
var fields = []string{"epoch", "open", "probe", "failures", "window", "reporters", "opener", "since"}

// Inspect reads everything the store holds of the breaker name. It reports
// false, and no error, when the store holds nothing of it: a breaker that
// never failed, or whose counts expired, in its first epoch.
func (s *Store) Inspect(ctx context.Context, name string) (Breaker, bool, error) {
	if s.err != nil {
		return Breaker{}, false, s.err
	}
	bs, err := s.inspect(ctx, []string{name})
	if err != nil {
		return Breaker{}, false, err
	}
	if len(bs) == 0 {
		return Breaker{}, false, nil
	}
	return bs[0], true, nil
}

// List returns every breaker of which the store holds something, by name.
// It finds them with SCAN over the store's keys (on every master of a
// Cluster, every shard of a Ring), then reads each as Inspect does, in one
// pipeline (split by node on a Cluster). A breaker created during the scan
// may be missed; one that changes is read as it is when read.
func (s *Store) List(ctx context.Context) ([]Breaker, error) {
	if s.err != nil {
		return nil, s.err
	}
	var mu sync.Mutex // scanKeys scans the nodes at once
	names := map[string]bool{}
	err := s.scanKeys(ctx, globEscape(s.prefix)+":{*}:*", func(key string) {
		if name, ok := s.nameOf(key); ok {
			mu.Lock()
			names[name] = true
			mu.Unlock()
		}
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: list the breakers of prefix %q: %w", s.prefix, err)
	}
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	slices.Sort(list)
	return s.inspect(ctx, list)
}

// Forget deletes every key the store holds of the breaker name (its epoch,
// open marker, probe lease and counts, whatever their fields) and returns
// how many it deleted: none when the store held nothing of it. It finds
// them with SCAN, as List does, and deletes them with one DEL (they share
// a hash slot).
//
// It is for a name no process uses: a mistyped force-open, say, whose
// epoch the store would otherwise keep for good. A process that still
// shares the breaker finds the store emptied of it, as after a FLUSHALL,
// and goes on from what it knows (see docs/shared-state.md); a key it
// writes between the scan and the delete may survive.
func (s *Store) Forget(ctx context.Context, name string) (int, error) {
	if err := s.Check(name); err != nil {
		return 0, err
	}
	var mu sync.Mutex
	var keys []string
	own := s.Key(name, "")
	err := s.scanKeys(ctx, globEscape(own)+"*", func(key string) {
		// The pattern of "a" matches the keys of "a}:b" too
		// ("prefix:{a}:b}:epoch"); no field has "}:" in it.
		if field := strings.TrimPrefix(key, own); !strings.Contains(field, "}:") {
			mu.Lock()
			keys = append(keys, key)
			mu.Unlock()
		}
	})
	if err != nil {
		return 0, wrap("forget", name, err)
	}
	if len(keys) == 0 {
		return 0, nil
	}
	n, err := s.client.Del(ctx, keys...).Result()
	if err != nil {
		return 0, wrap("forget", name, err)
	}
	return int(n), nil
}

// scanKeys calls each with every key that matches pattern, found with SCAN
// on every master of a Cluster, every shard of a Ring, or the one server;
// each is called from several goroutines at once on a Cluster or a Ring.
func (s *Store) scanKeys(ctx context.Context, pattern string, each func(key string)) error {
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			each(it.Val())
		}
		return it.Err()
	}
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	case *redis.Ring:
		return c.ForEachShard(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	}
	return scan(ctx, s.client)
}

// inspect reads the breakers names with inspectScript, in one pipeline,
// and returns those of which the store holds something, in order.
func (s *Store) inspect(ctx context.Context, names []string) ([]Breaker, error) {
	if len(names) == 0 {
		return nil, nil
	}
	pipe := s.client.Pipeline()
	cmds := make([]*redis.Cmd, len(names))
	keys := make([]string, len(fields))
	for i, n := range names {
		for j, f := range fields {
			keys[j] = s.Key(n, f)
		}
		// Eval, not EvalSha: a pipeline cannot fall back on NOSCRIPT.
		cmds[i] = inspectScript.Eval(ctx, pipe, keys)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		if len(names) == 1 {
			return nil, wrap("inspect", names[0], err)
		}
		return nil, fmt.Errorf("redisstore: inspect %d breakers: %w", len(names), err)
	}
	out := make([]Breaker, 0, len(names))
	for i, n := range names {
		b, ok, err := parseBreaker(n, cmds[i].Val())
		if err != nil {
			return nil, wrap("inspect", n, err)
		}
		if ok {
			out = append(out, b)
		}
	}
	return out, nil
}

// parseBreaker reads inspectScript's reply. It reports false when no key
// of the breaker exists.
func parseBreaker(name string, v any) (Breaker, bool, error) {
	r, ok := v.([]any)
	if !ok || len(r) != 10 {
		return Breaker{}, false, fmt.Errorf("unexpected script reply %v", v)
	}
	epoch, _ := r[0].(string)
	open, ok1 := r[1].(int64)
	holder, _ := r[2].(string)
	probe, ok2 := r[3].(int64)
	failures, _ := r[4].(string)
	window, ok3 := r[5].([]any)
	reporters, ok4 := r[6].([]any)
	opener, ok5 := r[7].(string)
	now, ok6 := r[8].([]any)
	since, ok7 := r[9].(string)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 || len(window)%2 != 0 || len(now) != 2 {
		return Breaker{}, false, fmt.Errorf("unexpected script reply %v", v)
	}
	if epoch == "" && open == -2 && holder == "" && failures == "" && len(window) == 0 {
		return Breaker{}, false, nil
	}
	b := Breaker{Name: name, Holder: holder, Processes: int64(len(reporters))}
	for _, rep := range reporters {
		s, _ := rep.(string)
		b.Reporters = append(b.Reporters, s)
	}
	slices.Sort(b.Reporters)
	var e int64
	if epoch != "" {
		var err error
		if e, err = strconv.ParseInt(epoch, 10, 64); err != nil {
			return Breaker{}, false, fmt.Errorf("epoch %q: %w", epoch, err)
		}
	}
	b.Status = statusWith([]int64{e, open, probe}, opener)
	at, err := redisTime(now)
	if err != nil {
		return Breaker{}, false, err
	}
	b.At, b.Since = at, sinceOf(since, b)
	if failures != "" {
		n, err := strconv.ParseInt(failures, 10, 64)
		if err != nil {
			return Breaker{}, false, fmt.Errorf("failures %q: %w", failures, err)
		}
		b.Failures = n
	}
	if len(window) > 0 {
		b.Window, b.Failures = true, 0
	}
	for i := 0; i < len(window); i += 2 {
		f, _ := window[i].(string)
		c, _ := window[i+1].(string)
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil {
			return Breaker{}, false, fmt.Errorf("window field %q: %w", f, err)
		}
		switch {
		case strings.HasPrefix(f, "c"):
			b.Calls += n
		case strings.HasPrefix(f, "f"):
			b.Failures += n
		}
	}
	return b, true, nil
}

// redisTime reads TIME's reply: seconds and microseconds, as strings.
func redisTime(r []any) (time.Time, error) {
	sec, _ := r[0].(string)
	usec, _ := r[1].(string)
	s, err1 := strconv.ParseInt(sec, 10, 64)
	u, err2 := strconv.ParseInt(usec, 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, fmt.Errorf("unexpected TIME reply %v", r)
	}
	return time.Unix(s, u*1000), nil
}

// sinceOf returns when b entered its state, from the since key's value v
// ("epoch\nat_ms\nperiod_ms"): zero if v is empty, of another epoch (a
// value left from an older epoch) or does not parse, so that a bad value
// costs the breaker its since, not the read. A half-open breaker has been
// so since the end of the period or lease the key's script began.
func sinceOf(v string, b Breaker) time.Time {
	f := strings.Split(v, "\n")
	if len(f) != 3 {
		return time.Time{}
	}
	var n [3]int64
	for i := range f {
		var err error
		if n[i], err = strconv.ParseInt(f[i], 10, 64); err != nil || n[i] < 0 {
			return time.Time{}
		}
	}
	if uint64(n[0]) != b.Epoch {
		return time.Time{}
	}
	at := time.UnixMilli(n[1])
	if b.State() == breaker.HalfOpen {
		at = at.Add(time.Duration(n[2]) * time.Millisecond)
	}
	return at
}

// nameOf returns the name of the breaker whose key is key, if key is one
// of a breaker's keys under the store's prefix. A name may hold '}' and
// ':' (its hash tag then ends at its first '}'), but no field holds "}:",
// so the name ends at the last "}:".
func (s *Store) nameOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, s.prefix+":{")
	if !ok {
		return "", false
	}
	i := strings.LastIndex(rest, "}:")
	if i < 0 || !slices.Contains(fields, rest[i+2:]) {
		return "", false
	}
	return rest[:i], true
}

// globEscape escapes the characters SCAN's MATCH pattern gives a meaning.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\*?[]`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

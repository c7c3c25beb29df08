// Package redisstore shares breakers between processes through Redis: a
// breaker registered with a *Store in every replica of a service is one
// breaker for the whole fleet.
//
// # Keys
//
// The keys of a breaker named N, under the default prefix "fusebox", share
// the hash tag {N}, so they live in one slot of a Redis Cluster and every
// script touches one slot:
//
//	fusebox:{N}:failures  the shared run of failures (consecutive policy), with an idle expiry
//	fusebox:{N}:window    per-bucket calls and failures (window policy), bucketed by the server's clock
//	fusebox:{N}:open      the open marker; its TTL is the remaining open period
//	fusebox:{N}:probe     the probe lease; its value is the holder's token, its TTL the lease
//	fusebox:{N}:epoch     the epoch, advanced by every opening and closing: odd while opened
//	fusebox:{N}:reporters who reported the failures counted, under a quorum (Policy.Quorum above 1)
//	fusebox:{N}:opener    who opened the opened epoch, and why
//	fusebox:{N}:since     when the epoch's state began, on Redis's clock (for the command line)
//
// Changes are announced as "kind|milliseconds|epoch|name", on a Redis 7
// Cluster on the shard channel of the breaker's slot,
// "fusebox:changes:{tag}" (SPUBLISH, see ShardChannel), so that a change
// reaches only the master of that slot and its replicas; elsewhere on the
// one channel "fusebox:changes" (PUBLISH), which a Cluster would broadcast
// to every node. Options.Pubsub chooses otherwise. Watch hears every
// breaker; WatchNames hears the breakers it is told of, which on a Cluster
// takes a subscription per slot of those breakers instead of one per slot
// of the cluster.
//
// Every event is one atomic script, and every script does what the store's
// rules say (the pure function store.Memory runs; a conformance test holds
// the scripts to it): a failure is counted and its expiry set in one step;
// an opening applies only in the closed epoch its caller decided in, so the
// first opener's period stands; the probe lease is granted only in the
// opened epoch, once its period is over, to one holder; a probe's verdict
// is applied only by the lease holder; a status read is one script per
// breaker, atomic. A key holding data fusebox did not write fails that
// breaker's calls only (Status.Err), and a Reset repairs it. Time is never
// read from a replica: periods and leases are PX on write and PTTL on read.
//
// New works with a plain client (redis.NewClient), a Cluster client and a
// failover client: anything that is a redis.UniversalClient, built with
// ContextTimeoutEnabled so that every call ends at its deadline.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/reasontext"
	"github.com/fusebox-go/fusebox/store"
	"github.com/redis/go-redis/v9"
)

// Options configure a Store. The zero value is valid.
type Options struct {
	// Prefix begins every key and the changes channel. Zero means
	// "fusebox". It must not contain '{' or '}', which would break the
	// hash tags.
	Prefix string
	// FailureTTL is how long a run of consecutive failures is remembered
	// after its last failure. Zero means store.DefaultFailureTTL.
	FailureTTL time.Duration
	// SubscribeTimeout bounds each subscription of a watch: the writing
	// of each subscription command, and the servers' confirmation of a
	// batch of them after the last. So it bounds how long a manager's Stop
	// may wait for its watch while Redis hangs. Zero means
	// DefaultSubscribeTimeout.
	SubscribeTimeout time.Duration
	// Pubsub says where changes are announced: on a Cluster of Redis 7,
	// shard channels, one per slot, by default; otherwise one classic
	// channel. Zero means PubsubAuto.
	Pubsub Pubsub
}

// DefaultSubscribeTimeout is the SubscribeTimeout of zero Options: the
// manager's default StoreTimeout.
const DefaultSubscribeTimeout = 500 * time.Millisecond

// Store is a store.Store on Redis. It is safe for concurrent use. It does
// not own the client: close the client yourself when done.
//
// On a Cluster client, a call that fails because a node cannot be reached
// (a master died, and the client still sends its slots' commands there)
// makes the Store ask the client to reload the cluster's layout, at most
// every 250ms, so that it finds the promoted replica within a second or
// so instead of at the client's own reload, every minute.
type Store struct {
	client    redis.UniversalClient
	prefix    string
	channel   string
	ttl       time.Duration
	subscribe time.Duration
	reload    *reloader    // nil unless the client is a Cluster client
	dials     *dials       // the client's last failed dial (nil for a client not of go-redis's)
	found     atomic.Int32 // unknown, classic or sharded: where changes are announced
	err       error        // a configuration error, returned by every method
}

var _ store.Store = (*Store)(nil)

// New returns a Store on client. An invalid argument (a nil client, a
// client that ignores context deadlines, a prefix with braces, a negative
// FailureTTL) is reported by Err, and by Check, so that
// manager.Manager.Register of a breaker on this store fails with it; every
// other method returns it too.
//
// Every store call must end within its deadline (manager.Options
// StoreTimeout) whatever Redis does, so the client must honour context
// deadlines: a go-redis client does only with ContextTimeoutEnabled set in
// its options (redis.Options, redis.ClusterOptions, redis.FailoverOptions,
// redis.RingOptions); New refuses one without it, with an error naming the
// option.
//
// New adds a hook to a go-redis client (to each node client of a Cluster
// client or Ring as it makes them) that only notes the client's failed
// dials: a store call whose deadline ran out while the client could not
// connect then fails with both errors, "context deadline exceeded (the
// client cannot connect: dial tcp ...: connection refused)".
func New(client redis.UniversalClient, opts Options) *Store {
	s := &Store{client: client, prefix: opts.Prefix, ttl: opts.FailureTTL, reload: newReloader(client), dials: watchDials(client)}
	if s.prefix == "" {
		s.prefix = "fusebox"
	}
	if s.ttl == 0 {
		s.ttl = store.DefaultFailureTTL
	}
	if s.subscribe = opts.SubscribeTimeout; s.subscribe == 0 {
		s.subscribe = DefaultSubscribeTimeout
	}
	switch {
	case client == nil:
		s.err = errors.New("redisstore: the client is nil")
	case !honoursDeadlines(client):
		s.err = fmt.Errorf("redisstore: the %T ignores context deadlines, so a hung Redis would hold callers and Stop for its socket timeouts (3s by default) instead of manager.Options.StoreTimeout: set ContextTimeoutEnabled: true in its options", client)
	case strings.ContainsAny(s.prefix, "{}"):
		s.err = fmt.Errorf("redisstore: Options.Prefix %q must not contain '{' or '}'", opts.Prefix)
	case opts.FailureTTL < 0:
		s.err = fmt.Errorf("redisstore: Options.FailureTTL must not be negative, got %v", opts.FailureTTL)
	case opts.SubscribeTimeout < 0:
		s.err = fmt.Errorf("redisstore: Options.SubscribeTimeout must not be negative, got %v", opts.SubscribeTimeout)
	case opts.Pubsub > PubsubSharded:
		s.err = fmt.Errorf("redisstore: Options.Pubsub %v is none of PubsubAuto, PubsubClassic and PubsubSharded", opts.Pubsub)
	}
	_, cluster := client.(*redis.ClusterClient)
	switch {
	case opts.Pubsub == PubsubSharded && !cluster && s.err == nil:
		s.err = fmt.Errorf("redisstore: Options.Pubsub is PubsubSharded, which needs a Cluster client (*redis.ClusterClient), not a %T", client)
	case opts.Pubsub == PubsubSharded:
		s.found.Store(sharded)
	case opts.Pubsub == PubsubClassic || !cluster:
		s.found.Store(classic)
	}
	s.channel = s.prefix + ":changes"
	return s
}

// honoursDeadlines reports whether the client's socket reads and writes end
// at a context's deadline. go-redis clients do only with
// ContextTimeoutEnabled; a client of another type is taken at its word.
func honoursDeadlines(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

// Err returns the configuration error New found in its arguments, or nil.
func (s *Store) Err() error { return s.err }

// Check implements store.Store: it returns the configuration error New
// found, or an error for a name whose keys would not share a hash tag. A
// name that starts with '}' makes the tag of "prefix:{}name}:field" empty,
// so Redis hashes each key whole and a Cluster puts them in different
// slots, where no script can reach them together (CROSSSLOT).
func (s *Store) Check(name string) error {
	if s.err != nil {
		return s.err
	}
	if strings.HasPrefix(name, "}") {
		return fmt.Errorf("redisstore: breaker name %q starts with '}': its keys (%s) would hash to different slots of a Redis Cluster", name, s.Key(name, "open"))
	}
	return nil
}

// Key returns the key of a breaker's field ("failures", "window", "open" or
// "probe"), for inspection and tests.
func (s *Store) Key(name, field string) string { return s.prefix + ":{" + name + "}:" + field }

// Channel returns the name of the classic channel, on which changes are
// announced unless they are announced on shard channels (Sharded).
func (s *Store) Channel() string { return s.channel }

func ms(d time.Duration) int64 {
	m := d.Milliseconds()
	if m < 1 {
		m = 1
	}
	return m
}

func fromMS(v int64) time.Duration {
	if v <= 0 {
		return 0
	}
	return time.Duration(v) * time.Millisecond
}

func ints(v any, n int) ([]int64, error) {
	list, ok := v.([]any)
	if !ok || len(list) != n {
		return nil, fmt.Errorf("redisstore: unexpected script reply %v", v)
	}
	out := make([]int64, n)
	for i, x := range list {
		if out[i], ok = x.(int64); !ok {
			return nil, fmt.Errorf("redisstore: unexpected script reply %v", v)
		}
	}
	return out, nil
}

func wrap(op, name string, err error) error {
	return fmt.Errorf("redisstore: %s %q: %w", op, name, err)
}

// fail returns err of op on the breaker name, wrapped, after asking a
// Cluster client to reload the cluster's layout if err says a node cannot
// be reached (see reloadEvery).
func (s *Store) fail(op, name string, err error) error {
	now := time.Now()
	s.reload.after(err, now)
	return wrap(op, name, s.dials.explain(err, now))
}

// status reads a script's {epoch, open_pttl, probe_pttl}. An open marker
// without expiry (PTTL -1) in an opened epoch is a forced opening; in a
// closed epoch, the open marker is the fleet's slow start (see
// resolveScript).
func status(v []int64) store.Status {
	e := uint64(max(v[0], 0))
	if e%2 == 0 {
		return store.Status{Epoch: e, Probe: fromMS(v[2]), SlowStart: fromMS(v[1])}
	}
	return store.Status{Epoch: e, Open: fromMS(v[1]), Probe: fromMS(v[2]), Forced: v[1] == -1}
}

// statusWith is status with the opener key's value, read in the same
// script: its Reason, if it is the opened epoch's.
func statusWith(v []int64, opener string) store.Status {
	st := status(v)
	if st.Opened() && !st.Forced {
		st.Reason = parseOpener(opener, st.Epoch)
	}
	return st
}

// RecordFailure implements store.Store.
func (s *Store) RecordFailure(ctx context.Context, name string, p store.Policy, failures int64, successes []int64) (store.Verdict, error) {
	if s.err != nil {
		return store.Verdict{}, s.err
	}
	failures = max(failures, 1)
	if p.Rate > 0 {
		return s.window(ctx, name, p, failures, successes)
	}
	keys := []string{s.Key(name, "failures"), s.Key(name, "open"), s.Key(name, "probe"), s.Key(name, "epoch"), s.Key(name, "reporters"), s.Key(name, "opener")}
	r, err := failureScript.Run(ctx, s.client, keys, ms(s.ttl), p.Quorum, p.Reporter, failures).Result()
	if err != nil {
		return store.Verdict{}, s.fail("record failure of", name, err)
	}
	v, opener, err := reply(r, 6)
	if err != nil {
		return store.Verdict{}, err
	}
	return store.Verdict{Failures: v[0], Processes: v[1], Status: statusWith(v[2:5], opener), LargestFailures: v[5]}, nil
}

// RecordSuccess implements store.Store.
func (s *Store) RecordSuccess(ctx context.Context, name string, p store.Policy, successes []int64) (store.Verdict, error) {
	if s.err != nil {
		return store.Verdict{}, s.err
	}
	if p.Rate > 0 {
		return s.window(ctx, name, p, 0, successes)
	}
	keys := []string{s.Key(name, "failures"), s.Key(name, "reporters"), s.Key(name, "open"), s.Key(name, "probe"), s.Key(name, "epoch"), s.Key(name, "opener")}
	r, err := successScript.Run(ctx, s.client, keys).Result()
	if err != nil {
		return store.Verdict{}, s.fail("record success of", name, err)
	}
	v, opener, err := reply(r, 3)
	if err != nil {
		return store.Verdict{}, err
	}
	return store.Verdict{Status: statusWith(v, opener)}, nil
}

// window adds failures, and successes by age, to the window of a window
// policy and returns its counts.
func (s *Store) window(ctx context.Context, name string, p store.Policy, failures int64, successes []int64) (store.Verdict, error) {
	args := make([]any, 0, 5+len(successes))
	args = append(args, (p.Period / time.Duration(p.Buckets)).Milliseconds(), p.Buckets, failures, p.Quorum, p.Reporter)
	for _, n := range successes {
		args = append(args, n)
	}
	keys := []string{s.Key(name, "window"), s.Key(name, "open"), s.Key(name, "probe"), s.Key(name, "epoch"), s.Key(name, "reporters"), s.Key(name, "opener")}
	r, err := windowScript.Run(ctx, s.client, keys, args...).Result()
	if err != nil {
		return store.Verdict{}, s.fail("record the calls of", name, err)
	}
	v, opener, err := reply(r, 8)
	if err != nil {
		return store.Verdict{}, err
	}
	return store.Verdict{Calls: v[0], Failures: v[1], Processes: v[2], Status: statusWith(v[3:6], opener), LargestCalls: v[6], LargestFailures: v[7]}, nil
}

// Open implements store.Store.
func (s *Store) Open(ctx context.Context, name string, epoch uint64, period time.Duration, why store.Reason) (store.Status, bool, error) {
	if s.err != nil {
		return store.Status{}, false, s.err
	}
	cmd, channel, err := s.announce(ctx, name)
	if err != nil {
		return store.Status{}, false, wrap("open", name, err)
	}
	keys := []string{s.Key(name, "open"), s.Key(name, "probe"), s.Key(name, "epoch"), s.Key(name, "opener"), s.Key(name, "since")}
	r, err := openScript.Run(ctx, s.client, keys, epoch, max(period.Milliseconds(), 0), channel, name, cmd, reasonArg(why)).Result()
	if err != nil {
		return store.Status{}, false, s.fail("open", name, err)
	}
	v, opener, err := reply(r, 4)
	if err != nil {
		return store.Status{}, false, err
	}
	return statusWith(v[1:], opener), v[0] == 1, nil
}

// AcquireProbe implements store.Store.
func (s *Store) AcquireProbe(ctx context.Context, name, token string, epoch uint64, lease time.Duration) (bool, store.Status, error) {
	if s.err != nil {
		return false, store.Status{}, s.err
	}
	cmd, channel, err := s.announce(ctx, name)
	if err != nil {
		return false, store.Status{}, wrap("acquire the probe of", name, err)
	}
	keys := []string{s.Key(name, "open"), s.Key(name, "probe"), s.Key(name, "epoch"), s.Key(name, "opener"), s.Key(name, "since")}
	r, err := probeScript.Run(ctx, s.client, keys, token, ms(lease), epoch, channel, name, cmd).Result()
	if err != nil {
		return false, store.Status{}, s.fail("acquire the probe of", name, err)
	}
	v, opener, err := reply(r, 4)
	if err != nil {
		return false, store.Status{}, err
	}
	return v[0] == 1, statusWith(v[1:], opener), nil
}

// Resolve implements store.Store.
func (s *Store) Resolve(ctx context.Context, name, token string, epoch uint64, o classify.Outcome, reopen time.Duration, why store.Reason) (store.Status, bool, error) {
	if s.err != nil {
		return store.Status{}, false, s.err
	}
	verdict := "i"
	switch o {
	case classify.Success:
		verdict = "s"
	case classify.Failure:
		verdict = "f"
	}
	cmd, channel, err := s.announce(ctx, name)
	if err != nil {
		return store.Status{}, false, wrap("resolve the probe of", name, err)
	}
	period := ms(reopen)
	if o == classify.Success && reopen <= 0 {
		period = 0 // no slow start
	}
	keys := []string{s.Key(name, "probe"), s.Key(name, "open"), s.Key(name, "failures"), s.Key(name, "window"), s.Key(name, "epoch"), s.Key(name, "reporters"), s.Key(name, "opener"), s.Key(name, "since")}
	r, err := resolveScript.Run(ctx, s.client, keys, token, verdict, period, channel, name, epoch, cmd, reasonArg(why)).Result()
	if err != nil {
		return store.Status{}, false, s.fail("resolve the probe of", name, err)
	}
	v, opener, err := reply(r, 4)
	if err != nil {
		return store.Status{}, false, err
	}
	return statusWith(v[1:], opener), v[0] == 1, nil
}

// Reset implements store.Store.
func (s *Store) Reset(ctx context.Context, name string) (store.Status, error) {
	if s.err != nil {
		return store.Status{}, s.err
	}
	cmd, channel, err := s.announce(ctx, name)
	if err != nil {
		return store.Status{}, wrap("reset", name, err)
	}
	keys := []string{s.Key(name, "open"), s.Key(name, "probe"), s.Key(name, "failures"), s.Key(name, "window"), s.Key(name, "epoch"), s.Key(name, "reporters"), s.Key(name, "opener"), s.Key(name, "since")}
	e, err := resetScript.Run(ctx, s.client, keys, channel, name, cmd).Int64()
	if err != nil {
		return store.Status{}, s.fail("reset", name, err)
	}
	return store.Status{Epoch: uint64(max(e, 0))}, nil
}

// ForceOpen implements store.Store.
func (s *Store) ForceOpen(ctx context.Context, name string) (store.Status, error) {
	if s.err != nil {
		return store.Status{}, s.err
	}
	cmd, channel, err := s.announce(ctx, name)
	if err != nil {
		return store.Status{}, wrap("force open", name, err)
	}
	keys := []string{s.Key(name, "open"), s.Key(name, "probe"), s.Key(name, "epoch"), s.Key(name, "opener"), s.Key(name, "since")}
	r, err := forceScript.Run(ctx, s.client, keys, channel, name, cmd).Result()
	if err != nil {
		return store.Status{}, s.fail("force open", name, err)
	}
	v, err := ints(r, 3)
	if err != nil {
		return store.Status{}, err
	}
	return status(v), nil
}

// Status implements store.Store. It sends one pipeline (a Cluster client
// splits it by node) of one script per breaker, which reads the
// breaker's status atomically. A breaker whose keys hold bad data (an
// epoch that is not one, a key of the wrong type) gets a status whose Err
// says so; the others are read as usual.
func (s *Store) Status(ctx context.Context, names []string) ([]store.Status, error) {
	if s.err != nil {
		return nil, s.err
	}
	if len(names) == 0 {
		return nil, nil
	}
	cmds, err := s.statuses(ctx, names, false)
	if err != nil && isNoScript(err) {
		// The server does not have the script yet (a restart, a new
		// node): send it whole, once (EVAL, which a fleet's ACL allows
		// where SCRIPT LOAD it need not), and the server keeps it.
		cmds, err = s.statuses(ctx, names, true)
	}
	if err != nil {
		now := time.Now()
		s.reload.after(err, now)
		return nil, fmt.Errorf("redisstore: status of %d breakers: %w", len(names), s.dials.explain(err, now))
	}
	out := make([]store.Status, len(names))
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			out[i].Err = wrap("read the status of", names[i], err)
			continue
		}
		v, opener, err := reply(cmd.Val(), 3)
		if err != nil {
			out[i].Err = wrap("read the status of", names[i], err)
			continue
		}
		out[i] = statusWith(v, opener)
	}
	return out, nil
}

// statuses sends the status read of names: one statusScript each (its
// text whole, or by its hash), in one pipeline. It returns the commands, and an error if the read as a whole
// failed: not one breaker's bad data (see badData), which its command
// holds.
func (s *Store) statuses(ctx context.Context, names []string, whole bool) ([]*redis.Cmd, error) {
	pipe := s.client.Pipeline()
	cmds := make([]*redis.Cmd, len(names))
	for i, n := range names {
		keys := []string{s.Key(n, "epoch"), s.Key(n, "open"), s.Key(n, "probe"), s.Key(n, "opener")}
		if whole {
			cmds[i] = statusScript.Eval(ctx, pipe, keys)
		} else {
			cmds[i] = statusScript.EvalSha(ctx, pipe, keys)
		}
	}
	_, err := pipe.Exec(ctx)
	if err == nil {
		return cmds, nil
	}
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && !badData(err) {
			return nil, err
		}
	}
	return cmds, nil
}

// badData reports whether err is the server's answer that a breaker's
// keys hold what fusebox did not write: the scripts' "bad data" error, or
// a key of the wrong type. Anything else (a connection lost, a cluster
// down) is the store's, not one breaker's.
func badData(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "fusebox: bad data") || strings.HasPrefix(msg, "WRONGTYPE")
}

// isNoScript reports whether err says the server lacks a script.
func isNoScript(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// reasonArg is r as the scripts keep it: "by\nwhy", each on one line and
// bounded; "" for the zero Reason.
func reasonArg(r store.Reason) string {
	if r == (store.Reason{}) {
		return ""
	}
	return reasontext.Line(r.By, reasontext.Max) + "\n" + reasontext.Line(r.Why, reasontext.Max)
}

// parseOpener reads the opener key's value, "epoch\nby\nwhy", as the
// Reason of the opening of epoch e: zero for another epoch's, or none.
func parseOpener(v string, e uint64) store.Reason {
	ep, rest, ok := strings.Cut(v, "\n")
	if !ok || ep != strconv.FormatUint(e, 10) {
		return store.Reason{}
	}
	return parseReason(rest)
}

// parseReason reads "by\nwhy".
func parseReason(v string) store.Reason {
	by, why, _ := strings.Cut(v, "\n")
	return store.Reason{By: by, Why: why}
}

// reply reads a script's reply that carries a status: n integers, then
// the opener key's value.
func reply(v any, n int) ([]int64, string, error) {
	list, ok := v.([]any)
	if !ok || len(list) != n+1 {
		return nil, "", fmt.Errorf("redisstore: unexpected script reply %v", v)
	}
	out, err := ints(list[:n], n)
	if err != nil {
		return nil, "", err
	}
	opener, ok := list[n].(string)
	if !ok {
		return nil, "", fmt.Errorf("redisstore: unexpected script reply %v", v)
	}
	return out, opener, nil
}

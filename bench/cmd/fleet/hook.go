package main

import (
	"context"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// counter is a go-redis hook that counts the commands a client sends, by
// kind (see kindOf). It sees every command of the client's pool, one by one
// or in a pipeline; the pub/sub connection's SUBSCRIBE is not among them
// (the server's own counts have it).
type counter struct {
	mu sync.Mutex
	n  map[string]int64
}

func newCounter() *counter { return &counter{n: map[string]int64{}} }

func (c *counter) add(cmds ...redis.Cmder) {
	c.mu.Lock()
	for _, cmd := range cmds {
		c.n[kindOf(cmd.Args())]++
	}
	c.mu.Unlock()
}

// snapshot returns the counts so far.
func (c *counter) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// DialHook implements redis.Hook.
func (c *counter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

// ProcessHook implements redis.Hook.
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.add(cmds...)
		return next(ctx, cmds)
	}
}

// kindOf names a command for the counts: its name in lower case, but for
// what the store sends about a breaker, what it is for, read from the
// keys it touches in the layout docs/shared-state.md documents
// ("prefix:{name}:field"); see scriptKind. go-redis runs a script with
// EVALSHA, and only when the server answers NOSCRIPT (the first time the
// server sees it) sends it whole with EVAL: so an EVALSHA is one run of
// the script, and an EVAL is named "KIND (load)", a run that cost one
// more round trip.
func kindOf(args []any) string {
	if len(args) == 0 {
		return "?"
	}
	name, _ := args[0].(string)
	name = strings.ToLower(name)
	switch name {
	case "del":
		if len(args) > 1 && field(args[1]) == "failures" {
			return "success"
		}
		return name
	case "evalsha", "eval":
	default:
		return name
	}
	if len(args) < 3 {
		return name
	}
	nkeys, ok := toInt(args[2])
	if !ok || nkeys < 1 || len(args) < 3+nkeys {
		return name
	}
	fields := make([]string, nkeys)
	for i, k := range args[3 : 3+nkeys] {
		fields[i] = field(k)
	}
	kind := scriptKind(fields, args[3+nkeys:])
	if name == "eval" {
		kind += " (load)"
	}
	return kind
}

// field is the field of a breaker's key, "open" of "fusebox:{b00001}:open".
func field(key any) string {
	s, _ := key.(string)
	if i := strings.LastIndex(s, "}:"); i >= 0 {
		return s[i+2:]
	}
	return s
}

// scriptKind names a script of the store by the first key it touches, the
// one it is about, and for the three that touch only the open marker, the
// lease, the epoch (and, since the opener is kept, the opener), by their
// arguments (docs/shared-state.md and store/redisstore's scripts.go): a
// failure counted (failures), the window's counts (window), a probe's
// verdict (probe), a reset (open, with the counts among its keys), and
// the opening (the command that announces it fifth of six arguments, the
// reason last; 5 arguments with that command last, before the opener was
// kept; 4 before sharded pub/sub), a forcing (3, the last that command;
// 2 before) or the probe's lease (6, the last that command, since leases
// are announced; 3 before: a token, the lease, the epoch). Another is
// named by its keys, so that a change of the store shows as a new kind
// rather than a wrong one.
func scriptKind(fields []string, argv []any) string {
	switch fields[0] {
	case "failures":
		return "failure"
	case "window":
		return "window"
	case "probe":
		return "verdict"
	case "open":
		if len(fields) > 3 && fields[2] == "failures" {
			return "reset"
		}
		if len(fields) == 3 || len(fields) == 4 && fields[3] == "opener" {
			announces := func(i int) bool {
				if i < 0 || i >= len(argv) {
					return false
				}
				s, _ := argv[i].(string)
				return strings.EqualFold(s, "publish") || strings.EqualFold(s, "spublish")
			}
			last := len(argv) - 1
			switch {
			case len(argv) == 6 && announces(4), len(argv) == 5 && announces(last), len(argv) == 4:
				return "open"
			case len(argv) == 3 && announces(last), len(argv) == 2:
				return "force"
			case len(argv) == 6 && announces(last), len(argv) == 3:
				return "lease"
			}
		}
	}
	return "script(" + strings.Join(fields, ",") + ")"
}

func toInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case string:
		i, err := strconv.Atoi(n)
		return i, err == nil
	}
	return 0, false
}

// sortedKinds returns the kinds of counts, most first, then by name.
func sortedKinds(counts map[string]float64) []string {
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if counts[kinds[i]] != counts[kinds[j]] {
			return counts[kinds[i]] > counts[kinds[j]]
		}
		return kinds[i] < kinds[j]
	})
	return kinds
}

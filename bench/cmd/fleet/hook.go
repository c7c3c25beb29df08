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

// scriptKinds names the store's scripts by the fields of the keys they
// touch and their number of arguments: the layout docs/shared-state.md
// documents ("prefix:{name}:field"). A script of another shape is named
// by its fields, so that a change of the store shows as a new kind rather
// than a wrong one.
var scriptKinds = map[string]string{
	"failures,open,probe,epoch/1":        "failure",
	"window,open,probe,epoch":            "window", // any number of arguments
	"open,probe,epoch/4":                 "open",
	"open,probe,epoch/3":                 "lease",
	"open,probe,epoch/2":                 "force",
	"probe,open,failures,window,epoch/6": "verdict",
	"open,probe,failures,window,epoch/2": "reset",
}

// kindOf names a command for the counts: its name in lower case, or for a
// script what it does, from the fields of its keys. go-redis runs a script
// with EVALSHA, and only when the server answers NOSCRIPT (the first time
// a connection's server sees it) sends it whole with EVAL: so an EVALSHA
// is one run of the script, and an EVAL is named "KIND (load)", a run that
// cost one more round trip.
func kindOf(args []any) string {
	if len(args) == 0 {
		return "?"
	}
	name, _ := args[0].(string)
	name = strings.ToLower(name)
	if (name != "evalsha" && name != "eval") || len(args) < 3 {
		return name
	}
	nkeys, ok := toInt(args[2])
	if !ok || len(args) < 3+nkeys {
		return name
	}
	fields := make([]string, 0, nkeys)
	for _, k := range args[3 : 3+nkeys] {
		s, _ := k.(string)
		if i := strings.LastIndex(s, "}:"); i >= 0 {
			s = s[i+2:]
		}
		fields = append(fields, s)
	}
	shape := strings.Join(fields, ",")
	argc := len(args) - 3 - nkeys
	kind, ok := scriptKinds[shape+"/"+strconv.Itoa(argc)]
	if !ok {
		kind, ok = scriptKinds[shape]
	}
	if !ok {
		kind = "script(" + shape + ")"
	}
	if name == "eval" {
		kind += " (load)"
	}
	return kind
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

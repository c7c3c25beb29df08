// Command fusebox inspects and controls the circuit breakers a fleet shares
// through Redis (package redisstore), from the command line:
//
//	fusebox [-redis URL | -cluster ADDRS | -sentinel MASTER@ADDRS] [-prefix P] [-json] [-timeout D] COMMAND [NAME]
//
// list prints every breaker of which the store holds something, show one
// in full; force-open, half-open and reset act through the store, as a
// manager's Breaker.ForceOpen, HalfOpen and Reset do, so every process of
// the fleet follows;
// forget deletes every key of a breaker no process uses (a mistyped
// force-open, say); watch prints the changes of every breaker as they happen, until
// interrupted. Run fusebox -h for the flags, and see docs/operations.md.
//
// Exit status: 0 on success, 1 on an error it names on stderr, 2 on bad
// usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fusebox-go/fusebox/store/redisstore"
)

const usage = `Usage: fusebox [flags] COMMAND [NAME]

Inspect and control the circuit breakers a fleet shares through Redis.

Commands:
  list             every breaker of which the store holds something
  show NAME        one breaker in full
  force-open NAME  open NAME for every process, until a reset
  half-open NAME   end NAME's open period now: one trial for the fleet
                   (one process's next call), then its verdict and the
                   slow start, as after the period
  reset NAME       close NAME for every process, lifting a force-open
  forget NAME      delete every key of NAME, a breaker no process uses
                   (a mistyped force-open, say): list no longer shows it
  watch            print every change as it happens, until interrupted

Flags (before or after the command):
  -redis URL              one Redis server: redis://[user:password@]host:port[/db],
                          rediss://... for TLS, or host:port (default 127.0.0.1:6379)
  -cluster ADDRS          a Redis Cluster: host:port,host:port,...
  -sentinel MASTER@ADDRS  the master MASTER, found through the Sentinels
                          at ADDRS: mymaster@host:port,host:port,...
  -prefix P               the prefix of the store's keys (default "fusebox")
  -json                   one JSON object a line: per breaker, or per change
  -timeout D              how long to wait for Redis (default 5s); watch
                          waits this long to subscribe, then runs until
                          interrupted

Exit status: 0 on success, 1 on an error (named on stderr), 2 on bad usage.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command line args, writing to stdout and stderr, and
// returns the exit status. Cancelling ctx ends a watch, with status 0.
// It silences go-redis's own log, process-wide: an error is reported once,
// by run, with what failed.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	redis.SetLogger(silent{})
	inv, err := parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "fusebox: %v\n\n%s", err, usage)
		return 2
	}
	client, target, err := inv.connect()
	if err != nil {
		fmt.Fprintf(stderr, "fusebox: %v\n\n%s", err, usage)
		return 2
	}
	defer client.Close()
	st := redisstore.New(client, redisstore.Options{Prefix: inv.prefix, SubscribeTimeout: inv.timeout})
	if err := st.Err(); err != nil {
		fmt.Fprintf(stderr, "fusebox: %v\n\n%s", err, usage)
		return 2
	}
	c := &cli{st: st, client: client, target: target, timeout: inv.timeout, json: inv.json, stdout: stdout, stderr: stderr}
	if err := c.run(ctx, inv.command, inv.name); err != nil {
		fmt.Fprintf(stderr, "fusebox: %v\n", err)
		return 1
	}
	return 0
}

// silent is a go-redis logger that logs nothing.
type silent struct{}

func (silent) Printf(context.Context, string, ...any) {}

// target says where a client points, for messages.
type target struct {
	what string // "Redis", "Redis Cluster", `Redis master "m"`
	at   string // "at host:port", "through the Sentinels at host:port,host:port"
}

// String returns, for example, "Redis at host:port".
func (t target) String() string { return t.what + " " + t.at }

// invocation is what the command line asks for.
type invocation struct {
	redisURL, cluster, sentinel string
	prefix                      string
	json                        bool
	timeout                     time.Duration
	command, name               string
}

// commands maps each command to whether it takes a breaker's name.
var commands = map[string]bool{"list": false, "show": true, "force-open": true, "half-open": true, "reset": true, "forget": true, "watch": false}

// parse reads the command line. Flags may come before or after the
// command and its name; after "--" every argument is positional, so a
// breaker's name may start with '-'.
func parse(args []string) (invocation, error) {
	var inv invocation
	fs := flag.NewFlagSet("fusebox", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run prints the usage, to stdout for -h
	fs.StringVar(&inv.redisURL, "redis", "", "")
	fs.StringVar(&inv.cluster, "cluster", "", "")
	fs.StringVar(&inv.sentinel, "sentinel", "", "")
	fs.StringVar(&inv.prefix, "prefix", "fusebox", "")
	fs.BoolVar(&inv.json, "json", false, "")
	fs.DurationVar(&inv.timeout, "timeout", 5*time.Second, "")
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return inv, err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	if len(pos) > 0 && pos[0] == "help" {
		return inv, flag.ErrHelp
	}
	set := 0
	for _, v := range []string{inv.redisURL, inv.cluster, inv.sentinel} {
		if v != "" {
			set++
		}
	}
	switch {
	case set > 1:
		return inv, errors.New("use one of -redis, -cluster and -sentinel")
	case inv.timeout <= 0:
		return inv, fmt.Errorf("-timeout must be positive, got %v", inv.timeout)
	case len(pos) == 0:
		return inv, errors.New("no command")
	}
	inv.command = pos[0]
	named, ok := commands[inv.command]
	switch {
	case !ok:
		return inv, fmt.Errorf("unknown command %q", inv.command)
	case named && len(pos) != 2:
		return inv, fmt.Errorf("%s takes one breaker name, got %d arguments", inv.command, len(pos)-1)
	case !named && len(pos) != 1:
		return inv, fmt.Errorf("%s takes no argument, got %q", inv.command, pos[1:])
	}
	if named {
		inv.name = pos[1]
	}
	return inv, nil
}

// connect builds the client the flags describe, and says where it points,
// for messages. Every client honours context deadlines, which
// redisstore.New requires.
func (inv invocation) connect() (redis.UniversalClient, target, error) {
	switch {
	case inv.cluster != "":
		addrs, err := addrList("-cluster", inv.cluster)
		if err != nil {
			return nil, target{}, err
		}
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
		return c, target{"Redis Cluster", "at " + strings.Join(addrs, ",")}, nil
	case inv.sentinel != "":
		master, list, ok := strings.Cut(inv.sentinel, "@")
		if !ok || master == "" {
			return nil, target{}, fmt.Errorf("-sentinel %q: want MASTER@host:port,host:port", inv.sentinel)
		}
		addrs, err := addrList("-sentinel", list)
		if err != nil {
			return nil, target{}, err
		}
		c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: master, SentinelAddrs: addrs, ContextTimeoutEnabled: true})
		return c, target{fmt.Sprintf("Redis master %q", master), "through the Sentinels at " + strings.Join(addrs, ",")}, nil
	}
	u := inv.redisURL
	if u == "" {
		u = "127.0.0.1:6379"
	}
	if !strings.Contains(u, "://") {
		u = "redis://" + u
	}
	opts, err := redis.ParseURL(u)
	if err != nil {
		// A url.Error quotes the URL, and so its password: say what is
		// wrong without it.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, target{}, fmt.Errorf("-redis: %v", err)
	}
	opts.ContextTimeoutEnabled = true
	return redis.NewClient(opts), target{"Redis", "at " + opts.Addr}, nil
}

// addrList splits a comma-separated list of host:port.
func addrList(flag, list string) ([]string, error) {
	var addrs []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if !strings.Contains(a, ":") {
			return nil, fmt.Errorf("%s: %q is not host:port", flag, a)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s: no address", flag)
	}
	return addrs, nil
}

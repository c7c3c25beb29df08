package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fusebox-go/fusebox/store"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

// cli runs one command against one store.
type cli struct {
	st      *redisstore.Store
	client  redis.UniversalClient
	target  target
	timeout time.Duration
	json    bool
	stdout  io.Writer
	stderr  io.Writer
}

// errNoBreaker is the error of a breaker the store holds nothing of.
type errNoBreaker struct{ name string }

func (e errNoBreaker) Error() string {
	return fmt.Sprintf("no such breaker %q: the store holds nothing of it (fusebox list shows those it holds)", e.name)
}

// run runs command. Every command but watch must be done within the
// timeout; watch must be subscribed within it, and then runs until ctx is
// done.
func (c *cli) run(ctx context.Context, command, name string) error {
	if command == "watch" {
		if err := c.reach(ctx); err != nil {
			return err
		}
		return c.explain(c.watch(ctx))
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := c.reach(ctx); err != nil {
		return err
	}
	var err error
	switch command {
	case "list":
		err = c.list(ctx)
	case "show":
		err = c.show(ctx, name)
	case "force-open":
		err = c.act(ctx, name, "force-open", c.st.ForceOpen,
			"either no process has reported a failure of it lately, or the name is wrong; if it is wrong, fusebox reset %[1]q lifts the force-open")
	case "reset":
		err = c.act(ctx, name, "reset", c.st.Reset, "it was closed for the fleet already")
	case "half-open":
		err = c.halfOpen(ctx, name)
	case "forget":
		err = c.forget(ctx, name)
	default:
		err = fmt.Errorf("unknown command %q", command)
	}
	return c.explain(err)
}

// reach pings Redis, so that a server that cannot be reached, or that is
// not Redis, is reported as that, with its address, rather than as the
// first command's failure.
func (c *cli) reach(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := c.client.Ping(ctx).Err(); err != nil {
		if notRedis(err) {
			return fmt.Errorf("the server %s is not a Redis server: its reply is not in Redis's protocol (is it the right port?): %w", c.target.at, err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %v (-timeout)", c.timeout)
		}
		return fmt.Errorf("%s unreachable %s: %w", c.target.what, c.target.at, err)
	}
	return nil
}

// notRedis reports whether err is go-redis's failure to read a reply in
// Redis's protocol: what it says of a server of another kind, such as an
// HTTP server, which answers its HELLO with "HTTP/1.1 400 Bad Request".
func notRedis(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "redis: can't parse") || strings.HasPrefix(msg, "redis: invalid reply")
}

// explain adds to a command's error where it went wrong.
func (c *cli) explain(err error) error {
	var none errNoBreaker
	switch {
	case err == nil || errors.As(err, &none):
		return err
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no answer from %s within %v (-timeout): %w", c.target, c.timeout, err)
	}
	return fmt.Errorf("%w (%s)", err, c.target)
}

func (c *cli) list(ctx context.Context) error {
	bs, err := c.st.List(ctx)
	if err != nil {
		return err
	}
	if c.json {
		for _, b := range bs {
			writeJSON(c.stdout, breakerJSON(b))
		}
		return nil
	}
	writeTable(c.stdout, bs)
	return nil
}

func (c *cli) show(ctx context.Context, name string) error {
	b, ok, err := c.st.Inspect(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return errNoBreaker{name}
	}
	c.print(b)
	return nil
}

// print writes one breaker in full.
func (c *cli) print(b redisstore.Breaker) {
	if c.json {
		writeJSON(c.stdout, breakerJSON(b))
		return
	}
	writeBreaker(c.stdout, b, c.st.Key(b.Name, "*"))
}

// act applies the store's own ForceOpen or Reset to the breaker name, for
// every process, and prints what the store holds of it after. A name the
// store held nothing of may be a healthy breaker or a typo: act goes ahead,
// and adds the note unknown, a format of the name, on stderr.
func (c *cli) act(ctx context.Context, name, command string, do func(context.Context, string) (store.Status, error), unknown string) error {
	_, known, err := c.st.Inspect(ctx, name)
	if err != nil {
		return err
	}
	st, err := do(ctx, name)
	if err != nil {
		return err
	}
	b, ok, err := c.st.Inspect(ctx, name)
	if err != nil {
		return fmt.Errorf("%s %q done (epoch %d), but reading it back failed: %w", command, name, st.Epoch, err)
	}
	if !ok { // it is done: the store holds its epoch at least
		return fmt.Errorf("%s %q done (epoch %d), but the store holds nothing of it after", command, name, st.Epoch)
	}
	c.print(b)
	if !known {
		fmt.Fprintf(c.stderr, "fusebox: note: the store held nothing of %q before: "+unknown+"\n", name)
	}
	return nil
}

// forget deletes every key of the breaker name, and says how many: a name
// the store held nothing of is an error, as for show.
func (c *cli) forget(ctx context.Context, name string) error {
	n, err := c.st.Forget(ctx, name)
	if err != nil {
		return err
	}
	if n == 0 {
		return errNoBreaker{name}
	}
	if c.json {
		writeJSON(c.stdout, struct {
			Name    string `json:"name"`
			Deleted int    `json:"deleted"`
		}{name, n})
		return nil
	}
	keys := "keys"
	if n == 1 {
		keys = "key"
	}
	fmt.Fprintf(c.stdout, "forgot %q: %d %s deleted\n", name, n, keys)
	return nil
}

// watchBuffer is how many changes watch holds while its output is slow,
// before it drops them, counted: a Watch callback must not block.
const watchBuffer = 4096

// heard is one change as the watch heard it.
type heard struct {
	at     time.Time
	change store.Change
	ready  bool // the subscription is in place: no change, the header
}

// watched names what the watch listens to: the classic channel, or, on a
// Cluster whose changes go to shard channels, those of every slot.
func (c *cli) watched(ctx context.Context) string {
	if sh, err := c.st.Sharded(ctx); err == nil && sh {
		return "the shard channels " + c.st.Channel() + ":{tag} of every slot"
	}
	return c.st.Channel()
}

func (c *cli) watch(ctx context.Context) error {
	lines := make(chan heard, watchBuffer)
	var dropped atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for h := range lines {
			switch {
			case h.ready:
				fmt.Fprintf(c.stderr, "fusebox: watching %s on %s; interrupt (Ctrl-C) to stop\n", c.watched(ctx), c.target)
				if !c.json {
					writeChangeHeader(c.stdout)
				}
			case c.json:
				writeJSON(c.stdout, changeJSON(h.at, h.change))
			default:
				writeChange(c.stdout, h.at, h.change)
			}
			if n := dropped.Swap(0); n > 0 {
				fmt.Fprintf(c.stderr, "fusebox: %d changes not printed: the output did not keep up\n", n)
			}
		}
	}()
	send := func(h heard) {
		select {
		case lines <- h:
		default:
			dropped.Add(1)
		}
	}
	err := c.st.Watch(ctx, func() { send(heard{ready: true}) }, func(ch store.Change) {
		send(heard{at: time.Now(), change: ch})
	})
	close(lines)
	<-done
	if n := dropped.Load(); n > 0 {
		fmt.Fprintf(c.stderr, "fusebox: %d changes not printed: the output did not keep up\n", n)
	}
	return err
}

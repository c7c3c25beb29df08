package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// buffer is a bytes.Buffer safe for a watch writing while a test reads.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// result is what one run of the command line did.
type result struct {
	code           int
	stdout, stderr string
}

// fusebox runs the command line in this process, to its end.
func fusebox(args ...string) result {
	var out, errs buffer
	code := run(context.Background(), args, &out, &errs)
	return result{code, out.String(), errs.String()}
}

// lines returns the lines of s, without the last newline.
func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

// row returns the fields of the line of list's table for the breaker
// name, or nil.
func row(table, name string) []string {
	for _, l := range lines(table) {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return f
		}
	}
	return nil
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var errBoom = errors.New("boom")

// peer is one process of a fleet: a manager, its own client, one breaker.
type peer struct {
	m *manager.Manager
	b *manager.Breaker
}

// startPeer starts a manager on client, with the breaker name registered
// on a store of it, and stops both when the test ends.
func startPeer(t *testing.T, client redis.UniversalClient, name string, cfg manager.Config) *peer {
	t.Helper()
	return startNamedPeer(t, client, "", name, cfg)
}

// startNamedPeer is startPeer for a process named process
// (manager.Options.Name; "" for the default).
func startNamedPeer(t *testing.T, client redis.UniversalClient, process, name string, cfg manager.Config) *peer {
	t.Helper()
	cfg.Store = redisstore.New(client, redisstore.Options{})
	m := manager.Start(manager.Options{Logger: quiet, Name: process})
	b, err := m.Register(name, cfg)
	if err != nil {
		m.Stop()
		client.Close()
		t.Fatalf("Register(%q): %v", name, err)
	}
	t.Cleanup(func() {
		m.Stop()
		client.Close()
	})
	return &peer{m: m, b: b}
}

// trip fails calls through the peer's breaker until it declines one, and
// waits for its opening to reach the store.
func (p *peer) trip(t *testing.T) {
	t.Helper()
	for range 100 {
		err := p.b.Do(context.Background(), func(context.Context) error { return errBoom })
		if err != nil && !errors.Is(err, errBoom) {
			p.m.Sync()
			return
		}
	}
	t.Fatalf("%s: 100 failures did not open it", p.b.Name())
}

// waitFor polls cond, every few milliseconds, until it holds or within
// has passed.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Replicate copies the writes of a primary to a replica that hangs, through
// a breaker, and prints each step.
//
//	go run ./examples/replicate
//
// The primary is a bbolt file in a temporary directory. The replica is in
// memory and can be made to hang. The breaker trips on the third failure in
// a row and stays open 100ms; each replica call times out after 50ms.
//
// The run: a=1 is replicated. The replica hangs. b..f=2: the first three
// writes each wait the whole 50ms and fail with the timeout, which opens
// the breaker; the next two are declined at once. The keys the replica
// missed are pending in the primary's file. The replica recovers; when the
// open period ends, the replicator makes the trial call itself, the breaker
// closes and catch-up sends the pending keys: the replica holds exactly
// what the primary holds. Then the replica loses its data and a restore
// from an old backup brings back a key the primary does not hold; catch-up
// knows nothing of it (no key is pending), so the replicator rebuilds the
// replica: every key of the primary sent, the stale key deleted. The run
// takes about half a second.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	fbrecover "github.com/fusebox-go/fusebox/recover" // not recover: the name would hide the builtin recover()
	"github.com/fusebox-go/fusebox/replicate"
	"github.com/fusebox-go/fusebox/replicate/boltstore"
	"github.com/fusebox-go/fusebox/replicate/replicatetest"
)

// The run's settings.
const (
	tripAfter   = 3                      // failures in a row that trip the breaker
	openPeriod  = 100 * time.Millisecond // how long the breaker stays open
	callTimeout = 50 * time.Millisecond  // each replica call's timeout
)

var keys = []string{"a", "b", "c", "d", "e", "f", "g"}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "replicate:", err)
		os.Exit(1)
	}
}

// run plays the scenario, printing to out. It returns an error if the
// replica does not end up equal to the primary.
func run(out io.Writer) error {
	dir, err := os.MkdirTemp("", "fusebox-replicate")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	primary, err := boltstore.Open(filepath.Join(dir, "primary.db"))
	if err != nil {
		return err
	}
	defer primary.Close()

	m := manager.Start(manager.Options{})
	defer m.Stop()
	b, err := m.Register("replica", manager.Config{
		Strategy: breaker.Consecutive{Failures: tripAfter},
		Recover:  fbrecover.BasicTimeout{Open: openPeriod},
	})
	if err != nil {
		return err
	}
	events, unsubscribe := m.Subscribe(64)
	defer unsubscribe()

	replica := replicatetest.NewReplica()
	r, err := replicate.New(primary, replica, b, replicate.Options{Timeout: callTimeout, Manager: m})
	if err != nil {
		return err
	}
	defer r.Close()

	start := time.Now()
	say := func(format string, args ...any) {
		fmt.Fprintf(out, "%6.1fms  %s\n", float64(time.Since(start).Microseconds())/1000, fmt.Sprintf(format, args...))
	}
	// showEvents prints the breaker's transitions handled so far.
	showEvents := func() {
		m.Sync()
		for {
			select {
			case ev := <-events:
				say("breaker   %s", ev.Transition)
			default:
				return
			}
		}
	}
	ctx := context.Background()
	put := func(key, value string) error {
		t0 := time.Now()
		res, err := r.Put(ctx, key, []byte(value))
		if err != nil {
			return err
		}
		took := time.Since(t0).Round(100 * time.Microsecond)
		switch {
		case res.Replicated:
			say("put %s=%s   replicated (%v)", key, value, took)
		case errors.Is(res.Cause, breaker.ErrOpen):
			say("put %s=%s   declined by the breaker at once (%v, the primary write); %s stays pending", key, value, took, key)
		default:
			say("put %s=%s   not replicated after %v: %v; %s stays pending", key, value, took, res.Cause, key)
		}
		showEvents()
		return nil
	}

	fmt.Fprintf(out, "primary %s; breaker %q trips on %d failures in a row, open %v; replica calls time out after %v\n\n",
		primary.Path(), b.Name(), tripAfter, openPeriod, callTimeout)
	if err := put("a", "1"); err != nil {
		return err
	}
	replica.Hang()
	say("the replica hangs")
	for _, k := range keys[1:6] {
		if err := put(k, "2"); err != nil {
			return err
		}
	}
	say("pending in the primary's file: %d keys", r.Pending())

	replica.Heal()
	say("the replica recovers; no more writes: the replicator makes the trial itself when the breaker turns half_open")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	caughtUp := make(chan error, 1)
	go func() { caughtUp <- r.Wait(ctx) }()
wait:
	for {
		select {
		case ev := <-events:
			say("breaker   %s", ev.Transition)
		case err := <-caughtUp:
			if err != nil {
				return fmt.Errorf("catch-up did not finish: %w", err)
			}
			break wait
		}
	}
	showEvents()
	say("caught up: %d keys pending", r.Pending())
	if err := put("g", "3"); err != nil {
		return err
	}
	if err := compare(ctx, out, r, replica); err != nil {
		return err
	}

	// Catch-up knows only pending keys: a replica that lost its data
	// needs a rebuild.
	fmt.Fprintln(out)
	replica.Wipe()
	if err := replica.Put(ctx, "z", []byte("9")); err != nil { // and an old backup brings back z
		return err
	}
	say("the replica loses its data, and a restore from an old backup brings back z=9: it holds %s, %d keys pending", format(replica.Snapshot()), r.Pending())
	t0 := time.Now()
	if err := r.Rebuild(ctx); err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	say("rebuilt in %v: every key of the primary sent, and z, which the primary does not hold, deleted", time.Since(t0).Round(100*time.Microsecond))
	return compare(ctx, out, r, replica)
}

// compare prints what the primary and the replica hold, and returns an
// error if they differ.
func compare(ctx context.Context, out io.Writer, r *replicate.Replicator, replica *replicatetest.Replica) error {
	fmt.Fprintln(out)
	onReplica := replica.Snapshot()
	onPrimary := map[string]string{}
	for _, k := range keys {
		v, ok, err := r.Get(ctx, k)
		if err != nil {
			return err
		}
		if ok {
			onPrimary[k] = string(v)
		}
	}
	fmt.Fprintln(out, "primary:", format(onPrimary))
	fmt.Fprintln(out, "replica:", format(onReplica))
	if !maps.Equal(onPrimary, onReplica) {
		return errors.New("the replica differs from the primary")
	}
	fmt.Fprintln(out, "the replica holds exactly what the primary holds")
	return nil
}

func format(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s=%s ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}

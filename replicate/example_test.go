package replicate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/replicate"
	"github.com/fusebox-go/fusebox/replicate/replicatetest"
)

// A replica that goes down: the first failure opens the breaker, later
// writes are declined at once and stay pending, and when the open period
// ends the replicator makes the trial call itself and catches up.
func Example() {
	ctx := context.Background()
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()
	b, err := m.Register("replica", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Minute},
	})
	if err != nil {
		panic(err)
	}
	replica := replicatetest.NewReplica()
	r, err := replicate.New(replicate.NewMemory(), replica, b, replicate.Options{
		Timeout: 100 * time.Millisecond,
		Manager: m, // so that the replicator learns when the breaker turns half_open
	})
	if err != nil {
		panic(err)
	}
	defer r.Close()

	res, _ := r.Put(ctx, "a", []byte("1"))
	fmt.Println("a replicated:", res.Replicated)

	replica.Fail(errors.New("replica down"))
	res, _ = r.Put(ctx, "b", []byte("2"))
	fmt.Println("b replicated:", res.Replicated, "cause:", res.Cause)
	res, _ = r.Put(ctx, "c", []byte("3"))
	fmt.Println("c declined:", errors.Is(res.Cause, breaker.ErrOpen))
	fmt.Println("pending:", r.Pending())

	replica.Heal()
	mock.Add(time.Minute) // the open period ends
	m.Sync()
	if err := r.Wait(ctx); err != nil {
		panic(err)
	}
	fmt.Println("pending:", r.Pending(), "breaker:", b.State())
	fmt.Println("replica:", replica.Snapshot())
	// Output:
	// a replicated: true
	// b replicated: false cause: replica down
	// c declined: true
	// pending: 2
	// pending: 0 breaker: closed
	// replica: map[a:1 b:2 c:3]
}

// Get reads the primary, never the replica.
func ExampleReplicator_Get() {
	ctx := context.Background()
	m := manager.Start(manager.Options{})
	defer m.Stop()
	b, _ := m.Register("replica", manager.Config{})
	r, _ := replicate.New(replicate.NewMemory(), replicatetest.NewReplica(), b, replicate.Options{})
	defer r.Close()

	_, _ = r.Put(ctx, "greeting", []byte("hello"))
	v, ok, err := r.Get(ctx, "greeting")
	fmt.Println(string(v), ok, err)
	_, _ = r.Delete(ctx, "greeting")
	_, ok, _ = r.Get(ctx, "greeting")
	fmt.Println(ok)
	// Output:
	// hello true <nil>
	// false
}

// A replica that lost its data, and came back with a key from an old
// backup: catch-up has nothing to send (no key is pending), Rebuild sends
// every key of the primary and, the replica being a Lister, deletes the
// key the primary does not hold.
func ExampleReplicator_Rebuild() {
	ctx := context.Background()
	m := manager.Start(manager.Options{})
	defer m.Stop()
	b, err := m.Register("replica", manager.Config{})
	if err != nil {
		panic(err)
	}
	replica := replicatetest.NewReplica()
	r, err := replicate.New(replicate.NewMemory(), replica, b, replicate.Options{})
	if err != nil {
		panic(err)
	}
	defer r.Close()
	for _, k := range []string{"a", "b", "c"} {
		if _, err := r.Put(ctx, k, []byte(k+"!")); err != nil {
			panic(err)
		}
	}

	replica.Wipe()
	_ = replica.Put(ctx, "old", []byte("from the backup"))
	fmt.Println("replica:", replica.Snapshot(), "pending:", r.Pending())

	if err := r.Rebuild(ctx); err != nil {
		panic(err)
	}
	fmt.Println("replica:", replica.Snapshot())
	// Output:
	// replica: map[old:from the backup] pending: 0
	// replica: map[a:a! b:b! c:c!]
}

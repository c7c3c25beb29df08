package replicatetest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/fusebox-go/fusebox/replicate/replicatetest"
)

func ExampleReplica() {
	ctx := context.Background()
	r := replicatetest.NewReplica()
	fmt.Println("healthy:", r.Put(ctx, "a", []byte("1")))

	r.Fail(nil)
	fmt.Println("failing:", r.Put(ctx, "b", []byte("2")))

	r.Hang()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	fmt.Println("hanging:", r.Put(tctx, "c", []byte("3")))

	r.Heal()
	fmt.Println("holds:", r.Snapshot())
	// Output:
	// healthy: <nil>
	// failing: replicatetest: replica is down
	// hanging: context deadline exceeded
	// holds: map[a:1]
}

package store_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

// Two managers share a breaker through a Memory store: a trip in one opens
// it in both, and ForceOpen and Reset in one act in both. On the memory
// store a Sync of the manager that acted, then of the other, is all the
// waiting there is.
func ExampleNewMemory() {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	cfg := manager.Config{
		Strategy: breaker.Consecutive{Failures: 2},
		Recover:  recover.BasicTimeout{Open: time.Minute},
		Store:    mem,
	}
	a := manager.Start(manager.Options{Clock: mock})
	defer a.Stop()
	b := manager.Start(manager.Options{Clock: mock})
	defer b.Stop()
	pa, _ := a.Register("payments", cfg)
	pb, _ := b.Register("payments", cfg)
	sync := func() {
		for range 2 {
			a.Sync()
			b.Sync()
		}
	}

	down := errors.New("payments unavailable")
	for range 2 {
		_ = pa.Do(context.Background(), func(context.Context) error { return down })
	}
	sync()
	fmt.Println("after two failures in a:", pa.State(), pb.State())

	_ = pa.Reset()
	sync()
	fmt.Println("after a Reset in a:", pa.State(), pb.State())

	_ = pb.ForceOpen()
	sync()
	fmt.Println("after a ForceOpen in b:", pa.State(), pa.Snapshot().Forced, pb.State(), pb.Snapshot().Forced)
	// Output:
	// after two failures in a: open open
	// after a Reset in a: closed closed
	// after a ForceOpen in b: open true open true
}

package manager_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// HalfOpen ends the open period now: the next call is the probe, and its
// success closes the breaker, here into its slow start, as after the
// period's timer. Asked of a breaker that is not open, it says why.
func ExampleBreaker_HalfOpen() {
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()
	b, _ := m.Register("payments", manager.Config{
		Strategy:  breaker.Consecutive{Failures: 1},
		Recover:   recover.BasicTimeout{Open: time.Minute},
		SlowStart: 10 * time.Second,
	})
	ctx := context.Background()
	_ = b.Do(ctx, func(context.Context) error { return errors.New("unavailable") })
	fmt.Println(b.State())

	// The dependency is fixed: one trial now, instead of in a minute.
	if err := b.HalfOpen(); err != nil {
		fmt.Println(err)
	}
	fmt.Println(b.State())
	fmt.Println(b.HalfOpen())

	p, _ := b.Acquire(ctx)
	fmt.Println("probe:", p.Probe())
	p.Release(nil)
	m.Sync()
	fmt.Println(b.State(), "slow start:", b.Snapshot().SlowStart != nil)
	// Output:
	// open
	// half_open
	// fusebox: breaker "payments": HalfOpen: the breaker is half_open already: its next call is the probe
	// probe: true
	// closed slow start: true
}

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

// A breaker with a SlowStart gives a service that just recovered its
// traffic back gradually: a quarter of the calls a quarter of the way into
// the slow start, all of them at its end. A declined call is an
// *breaker.OpenError of the closed state that says when the slow start
// ends. (The mock clock makes the example exact; with the real clock
// leave Options.Clock out.)
func ExampleConfig_slowStart() {
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()
	b, err := m.Register("db", manager.Config{
		Strategy:  breaker.Consecutive{Failures: 1},
		Recover:   recover.BasicTimeout{Open: time.Second},
		SlowStart: 8 * time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	down := func(context.Context) error { return errors.New("connection refused") }
	up := func(context.Context) error { return nil }

	_ = b.Do(ctx, down) // trips
	mock.Add(time.Second)
	m.Sync()
	_ = b.Do(ctx, up) // the probe succeeds: a recovery, and the slow start begins
	mock.Add(2 * time.Second)
	m.Sync()

	st := b.Stats()
	fmt.Printf("%v, %.0f %% admitted until +%v\n", st.State, st.Admitted*100, st.SlowStartUntil.Sub(mock.Now()))
	admitted, declined := 0, 0
	var last *breaker.OpenError
	for range 10000 {
		if err := b.Do(ctx, up); errors.As(err, &last) {
			declined++
			continue
		}
		admitted++
	}
	fmt.Printf("about a quarter admitted: %v\n", admitted > 2000 && admitted < 3000)
	fmt.Printf("declined as %v until +%v\n", last.State, last.Until.Sub(mock.Now()))

	mock.Add(6 * time.Second)
	m.Sync()
	fmt.Printf("%.0f %% admitted\n", b.Stats().Admitted*100)
	// Output:
	// closed, 25 % admitted until +6s
	// about a quarter admitted: true
	// declined as closed until +6s
	// 100 % admitted
}

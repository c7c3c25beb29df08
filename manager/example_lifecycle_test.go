package manager_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
)

// Remove forgets a breaker: a call through its old handle gets ErrRemoved,
// subscribers learn of it, and the name can be registered again, fresh.
func ExampleManager_Remove() {
	m := manager.Start(manager.Options{})
	defer m.Stop()
	events, unsubscribe := m.Subscribe(8)
	defer unsubscribe()

	old, _ := m.Register("tenant-42", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	_ = old.Do(context.Background(), func(context.Context) error { return errors.New("timeout") })
	fmt.Println("before:", old.State())

	fmt.Println("removed:", m.Remove("tenant-42"))
	err := old.Do(context.Background(), func(context.Context) error { return nil })
	fmt.Println("old handle:", errors.Is(err, manager.ErrRemoved))

	b, _ := m.Register("tenant-42", manager.Config{})
	fmt.Println("again:", b.State())

	m.Sync()
	for range 2 {
		ev := <-events
		fmt.Println("event:", ev.Kind, ev.Name)
	}
	// Output:
	// before: open
	// removed: true
	// old handle: true
	// again: closed
	// event: transition tenant-42
	// event: removed tenant-42
}

// Reconfigure tunes a running breaker. A new Strategy counts from a fresh
// window: the failure before the change does not count towards the new
// threshold.
func ExampleBreaker_Reconfigure() {
	m := manager.Start(manager.Options{})
	defer m.Stop()
	b, _ := m.Register("search", manager.Config{Strategy: breaker.Consecutive{Failures: 2}})
	failing := func(context.Context) error { return errors.New("timeout") }

	_ = b.Do(context.Background(), failing)
	err := b.Reconfigure(manager.Config{Strategy: breaker.Consecutive{Failures: 3}})
	fmt.Println("reconfigured:", err)
	for range 2 {
		_ = b.Do(context.Background(), failing)
	}
	fmt.Println("after 2 more failures:", b.State())
	_ = b.Do(context.Background(), failing)
	fmt.Println("after 3:", b.State())

	err = b.Reconfigure(manager.Config{Strategy: breaker.Consecutive{}})
	fmt.Println(err)
	// Output:
	// reconfigured: <nil>
	// after 2 more failures: closed
	// after 3: open
	// fusebox: reconfigure breaker "search": Config.Strategy: breaker.Consecutive.Failures must be at least 1, got 0
}

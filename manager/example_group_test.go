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

// A breaker per tenant, made on first use: Get the tenant's breaker for
// each call. One tenant's failures open its breaker only.
func ExampleManager_Group() {
	m := manager.Start(manager.Options{})
	defer m.Stop()

	tenants, err := m.Group("tenants", manager.Config{
		Strategy: breaker.Consecutive{Failures: 2},
		Recover:  recover.BasicTimeout{Open: 10 * time.Second},
	}, manager.GroupOptions{Max: 100_000})
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx := context.Background()
	call := func(tenant string, fn func(context.Context) error) {
		b, err := tenants.Get(tenant)
		if err != nil {
			fmt.Println(err)
			return
		}
		err = b.Do(ctx, fn)
		if errors.Is(err, breaker.ErrOpen) {
			fmt.Printf("%s: declined\n", b.Name())
			return
		}
		fmt.Printf("%s: %v\n", b.Name(), err)
	}
	down := func(context.Context) error { return errors.New("shard down") }
	up := func(context.Context) error { return nil }
	call("acme", down)
	call("acme", down)
	call("acme", up)
	call("globex", up)
	fmt.Println("breakers:", tenants.Len())
	// Output:
	// tenants/acme: shard down
	// tenants/acme: shard down
	// tenants/acme: declined
	// tenants/globex: <nil>
	// breakers: 2
}

// A group bounded by Max forgets only breakers idle and closed for
// IdleTTL: while its one breaker counts a failure, a new key is refused
// rather than let it go.
func ExampleGroup_Get() {
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()

	hosts, _ := m.Group("hosts", manager.Config{}, manager.GroupOptions{Max: 1, IdleTTL: time.Minute})
	a, _ := hosts.Get("a.example")
	p, _ := a.Acquire(context.Background())
	p.Release(errors.New("timeout")) // one failure counted
	mock.Add(2 * time.Minute)

	_, err := hosts.Get("b.example")
	fmt.Println(errors.Is(err, manager.ErrGroupFull))

	a, _ = hosts.Get("a.example")
	p, _ = a.Acquire(context.Background())
	p.Release(nil) // the run of failures ends
	mock.Add(2 * time.Minute)

	b, err := hosts.Get("b.example")
	fmt.Println(b.Name(), err, hosts.Len())
	// Output:
	// true
	// hosts/b.example <nil> 1
}

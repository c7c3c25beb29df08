package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/store"
)

// halfOpen: a store.HalfOpener ends the open period of the opened epoch
// it is given, for every process: the next opened epoch, its period over,
// the opening's Reason kept, announced as an Opened change with a zero
// Open; one lease in the new epoch, none in the old; and it refuses,
// changing nothing, a closed breaker, another epoch, a breaker already
// half-open, one with a lease held, and a forced one.
func halfOpen(t *testing.T, h Harness) {
	s := h.New(t)
	ho, ok := s.(store.HalfOpener)
	if !ok {
		t.Skipf("%T does not implement store.HalfOpener", s)
	}
	const name = "svc"
	wctx, cancel := context.WithCancel(context.Background())
	changes := make(chan store.Change, 64)
	done := make(chan error, 1)
	subscribed := make(chan struct{})
	go func() { done <- s.Watch(wctx, func() { close(subscribed) }, func(c store.Change) { changes <- c }) }()
	defer func() {
		cancel()
		<-done
	}()
	select {
	case <-subscribed:
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not call ready within 5s")
	}
	next := func(what string) store.Change {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case c := <-changes:
				if c.Name == name {
					return c
				}
			case <-deadline:
				t.Fatalf("%s: no change within 5s", what)
			}
		}
	}
	refused := func(what string, epoch uint64) store.Status {
		t.Helper()
		before := status(t, s, name)
		st, ok, err := ho.HalfOpen(ctx(t), name, epoch)
		if err != nil || ok {
			t.Fatalf("HalfOpen(%d) %s: %+v, %v, %v; want refused", epoch, what, st, ok, err)
		}
		if after := status(t, s, name); after.Epoch != before.Epoch || after.Forced != before.Forced || (after.Probe == 0) != (before.Probe == 0) {
			t.Fatalf("HalfOpen(%d) %s changed the status: %+v, was %+v", epoch, what, after, before)
		}
		return st
	}

	if st := refused("of a closed breaker", 0); st.Opened() {
		t.Errorf("the refusal's status: %+v, want closed", st)
	}
	why := store.Reason{By: "web-7", Why: "connection refused"}
	st, _, err := s.Open(ctx(t), name, 0, time.Hour, why)
	if err != nil {
		t.Fatal(err)
	}
	next("the opening")
	refused("of another epoch", st.Epoch+2)
	st, ok, err = ho.HalfOpen(ctx(t), name, st.Epoch)
	if err != nil || !ok {
		t.Fatalf("HalfOpen of the open epoch: %v, %v; want it applied", ok, err)
	}
	if st.Epoch != 3 || st.Open != 0 || st.Probe != 0 || st.Forced || st.Reason != why {
		t.Errorf("HalfOpen's status: %+v; want epoch 3, period over, no lease, Reason %+v", st, why)
	}
	if c := next("the half-open"); c.Kind != store.Opened || c.Epoch != 3 || c.Open != 0 || c.Reason != why {
		t.Errorf("the half-open's change: %+v; want opened, epoch 3, Open 0, Reason %+v", c, why)
	}
	if got := status(t, s, name); got.Epoch != 3 || got.Open != 0 || got.Reason != why {
		t.Errorf("Status after HalfOpen: %+v", got)
	}
	refused("of a breaker half-open already", 3)
	if ok, _, err := s.AcquireProbe(ctx(t), name, "old", 1, time.Minute); err != nil || ok {
		t.Fatalf("AcquireProbe in the epoch HalfOpen ended: %v, %v; want refused", ok, err)
	}
	if ok, _, err := s.AcquireProbe(ctx(t), name, "web-8/1", 3, time.Minute); err != nil || !ok {
		t.Fatalf("AcquireProbe after HalfOpen: %v, %v; want won", ok, err)
	}
	next("the lease")
	if ok, _, err := s.AcquireProbe(ctx(t), name, "web-9/1", 3, time.Minute); err != nil || ok {
		t.Fatalf("a second AcquireProbe after HalfOpen: %v, %v; want refused", ok, err)
	}
	refused("with a lease held", 3)
	if _, err := s.ForceOpen(ctx(t), name); err != nil {
		t.Fatal(err)
	}
	next("the forcing")
	st = status(t, s, name)
	refused("of a forced breaker", st.Epoch)
	if !status(t, s, name).Forced {
		t.Error("a refused HalfOpen lifted a forcing")
	}
}

package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/store"
)

// slowStart checks the fleet's slow start: a probe's success with a slow
// start closes the breaker with it, which the status counts down (in a
// closed epoch only: it is no open period), which the Closed change
// carries, which ends by itself, and which Reset ends; an opening in the
// next epoch is an opening as ever.
func slowStart(t *testing.T, h Harness) {
	s := h.New(t)
	wctx, cancel := context.WithCancel(context.Background())
	changes := make(chan store.Change, 16)
	done := make(chan error, 1)
	subscribed := make(chan struct{})
	go func() { done <- s.Watch(wctx, func() { close(subscribed) }, func(c store.Change) { changes <- c }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch after cancel: %v; want nil", err)
		}
	}()
	select {
	case <-subscribed:
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not call ready within 5s")
	}
	recoverWith := func(name string, slow time.Duration) store.Status {
		t.Helper()
		st, _, err := s.Open(ctx(t), name, 0, time.Millisecond, store.Reason{})
		if err != nil {
			t.Fatal(err)
		}
		e := st.Epoch
		h.Advance(t, time.Millisecond)
		eventually(t, h, time.Millisecond, "the open period ends", func() bool { return status(t, s, name).Open == 0 })
		if ok, _, err := s.AcquireProbe(ctx(t), name, "p", e, time.Minute); err != nil || !ok {
			t.Fatalf("AcquireProbe: %v, %v", ok, err)
		}
		st, applied, err := s.Resolve(ctx(t), name, "p", e, classify.Success, slow, store.Reason{})
		if err != nil || !applied || st.Opened() {
			t.Fatalf("Resolve success with a slow start of %v: %+v, %v, %v; want closed", slow, st, applied, err)
		}
		return st
	}
	// The changes of the subscription may start late: wait for the Closed
	// change of "svc".
	closedChange := func(name string) store.Change {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case c := <-changes:
				if c.Name == name && c.Kind == store.Closed {
					return c
				}
			case <-deadline:
				t.Fatalf("no Closed change of %q within 5s", name)
			}
		}
	}

	// On a store that keeps real time, a shorter slow start, polled.
	slow := 10 * time.Second
	if h.Real {
		slow = 2 * time.Second
	}
	st := recoverWith("svc", slow)
	if st.SlowStart <= slow-h.Slack || st.SlowStart > slow || st.Open != 0 || st.Forced {
		t.Fatalf("Resolve's status: %+v; want closed with a slow start of about %v, no open period", st, slow)
	}
	if c := closedChange("svc"); c.SlowStart != slow || c.Open != 0 {
		t.Fatalf("Closed change: %+v; want SlowStart %v and no open period", c, slow)
	}
	h.Advance(t, slow*4/10)
	eventually(t, h, slow*4/10, "the store counts the slow start down", func() bool {
		st := status(t, s, "svc")
		if st.Open != 0 || st.Opened() || st.SlowStart <= 0 && !h.Real {
			t.Fatalf("during the slow start: %+v; want closed with a slow start left", st)
		}
		return st.SlowStart <= slow*6/10
	})
	h.Advance(t, slow*6/10)
	eventually(t, h, slow*6/10, "the slow start ends", func() bool { return status(t, s, "svc").SlowStart == 0 })

	// Reset ends a slow start; a closing without one has none.
	recoverWith("reset", slow)
	if st, err := s.Reset(ctx(t), "reset"); err != nil || st.SlowStart != 0 {
		t.Fatalf("Reset: %+v, %v; want no slow start", st, err)
	}
	if st := status(t, s, "reset"); st.SlowStart != 0 || st.Opened() {
		t.Fatalf("after Reset: %+v; want closed without a slow start", st)
	}
	if st := recoverWith("plain", 0); st.SlowStart != 0 {
		t.Fatalf("a closing without a slow start: %+v", st)
	}
	if c := closedChange("plain"); c.SlowStart != 0 {
		t.Fatalf("Closed change without a slow start: %+v", c)
	}

	// An opening during a slow start is an opening as ever, and the next
	// closing by Reset has no slow start.
	st = recoverWith("again", slow)
	st, opened, err := s.Open(ctx(t), "again", st.Epoch, time.Minute, store.Reason{})
	if err != nil || !opened || st.Open <= 50*time.Second || st.SlowStart != 0 || st.Forced {
		t.Fatalf("Open during a slow start: %+v, %v, %v; want open about a minute, no slow start", st, opened, err)
	}
	if st := status(t, s, "again"); st.Open <= 50*time.Second || st.SlowStart != 0 {
		t.Fatalf("status after the opening: %+v", st)
	}
}

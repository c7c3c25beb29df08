package storetest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/store"
)

// namesWatcher is what a store implements when its watch can follow the
// breakers a caller names, and only those (redisstore, whose watch on a
// Cluster then subscribes to the shard channels of their slots only). The
// store port may grow it as an optional interface; the suite checks it
// where a store has it.
type namesWatcher interface {
	WatchNames(ctx context.Context, names func() ([]string, <-chan struct{}), ready func([]string), fn func(store.Change)) error
}

// nameList is a list of breakers that grows while a watch follows it, as a
// manager's does while breakers register.
type nameList struct {
	mu      sync.Mutex
	list    []string
	changed chan struct{}
}

func (l *nameList) names() ([]string, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list), l.changed
}

func (l *nameList) add(names ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, names...)
	close(l.changed)
	l.changed = make(chan struct{})
}

// watchNames: WatchNames calls ready with the breakers of its first list
// once it hears them, and with each breaker added later once it hears that
// one too, without losing the others: a change made after ready is always
// delivered, with no retry.
func watchNames(t *testing.T, h Harness) {
	s := h.New(t)
	nw, ok := s.(namesWatcher)
	if !ok {
		t.Skipf("%T has no WatchNames", s)
	}
	l := &nameList{list: []string{"a"}, changed: make(chan struct{})}
	readies := make(chan []string, 16)
	changes := make(chan store.Change, 64)
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- nw.WatchNames(wctx, l.names, func(n []string) { readies <- n }, func(c store.Change) { changes <- c })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("WatchNames after cancel: %v; want nil", err)
		}
	}()
	// ready waits until ready has named every breaker of want, in one
	// call or several.
	ready := func(want ...string) {
		t.Helper()
		left := slices.Clone(want)
		for len(left) > 0 {
			select {
			case got := <-readies:
				for _, n := range got {
					i := slices.Index(left, n)
					if i < 0 {
						t.Fatalf("ready(%v) while waiting for %v: %q is not new", got, want, n)
					}
					left = slices.Delete(left, i, i+1)
				}
			case err := <-done:
				t.Fatalf("WatchNames ended before ready(%v): %v", want, err)
			case <-time.After(5 * time.Second):
				t.Fatalf("ready(%v) not called within 5s; still missing %v", want, left)
			}
		}
	}
	// heard waits for the change of name that a call made after ready.
	heard := func(name string, kind store.ChangeKind) {
		t.Helper()
		for {
			select {
			case c := <-changes:
				if c.Name == name && c.Kind == kind {
					return
				}
			case err := <-done:
				t.Fatalf("WatchNames ended before the change %v of %q: %v", kind, name, err)
			case <-time.After(5 * time.Second):
				t.Fatalf("the change %v of %q, made after ready, was not delivered within 5s", kind, name)
			}
		}
	}
	open := func(name string) {
		t.Helper()
		if _, _, err := s.Open(ctx(t), name, 0, time.Hour, store.Reason{}); err != nil {
			t.Fatalf("Open(%q): %v", name, err)
		}
	}

	ready("a")
	open("a")
	heard("a", store.Opened)

	l.add("b")
	ready("b")
	open("b")
	heard("b", store.Opened)
	if _, err := s.ForceOpen(ctx(t), "a"); err != nil {
		t.Fatal(err)
	}
	heard("a", store.Forced)

	// Several breakers at once, and one already watched.
	l.add("c", "d", "a")
	ready("c", "d")
	open("d")
	heard("d", store.Opened)
	open("c")
	heard("c", store.Opened)
	if _, err := s.Reset(ctx(t), "b"); err != nil {
		t.Fatal(err)
	}
	heard("b", store.Reset)
}

package replicatetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/fusebox-go/fusebox/replicate"
)

// TestPrimary checks that the Primary returned by open keeps the promises
// of replicate.Primary: a write stores the change and a pending mark with a
// new, growing sequence number together; Confirm clears a mark only for
// the sequence number it carries; PendingKeys and Keys list keys in order
// from a cursor; Mark marks a key without touching its value; the
// rebuild's progress reads back as it was recorded; values are copied in
// and out. open is called once per
// subtest and must return an empty Primary; it is the caller's job to close
// it (with t.Cleanup).
func TestPrimary(t *testing.T, open func(t *testing.T) replicate.Primary) {
	ctx := context.Background()

	t.Run("PutMarksPending", func(t *testing.T) {
		p := open(t)
		must(t, p.Put(ctx, "k", []byte("v1")))
		e := lookup(t, p, "k")
		if !e.Found || string(e.Value) != "v1" || !e.Pending() {
			t.Fatalf("after Put(k, v1): Lookup = %+v, want found v1 with a pending mark", e)
		}
		if n := p.PendingCount(); n != 1 {
			t.Fatalf("after Put(k): PendingCount = %d, want 1", n)
		}
		v, ok, err := p.Get(ctx, "k")
		if err != nil || !ok || string(v) != "v1" {
			t.Fatalf("Get(k) = %q, %v, %v; want v1, true, nil", v, ok, err)
		}
	})

	t.Run("SequenceGrows", func(t *testing.T) {
		p := open(t)
		var last uint64
		for i, op := range []string{"put a", "put b", "put a", "delete a", "delete zz"} {
			var key string
			if op[:3] == "put" {
				key = op[4:]
				must(t, p.Put(ctx, key, []byte(op)))
			} else {
				key = op[7:]
				must(t, p.Delete(ctx, key))
			}
			seq := lookup(t, p, key).Seq
			if seq <= last {
				t.Fatalf("write %d (%s): sequence number %d, not above the previous %d", i, op, seq, last)
			}
			last = seq
		}
		if n := p.PendingCount(); n != 3 {
			t.Fatalf("pending keys a, b, zz: PendingCount = %d, want 3", n)
		}
	})

	t.Run("DeleteMarksPending", func(t *testing.T) {
		p := open(t)
		must(t, p.Put(ctx, "k", []byte("v")))
		must(t, p.Delete(ctx, "k"))
		e := lookup(t, p, "k")
		if e.Found || e.Value != nil || !e.Pending() {
			t.Fatalf("after Delete(k): Lookup = %+v, want absent with a pending mark", e)
		}
		if _, ok, _ := p.Get(ctx, "k"); ok {
			t.Fatal("after Delete(k): Get finds k")
		}
	})

	t.Run("ConfirmOnlyTheSequenceMarked", func(t *testing.T) {
		p := open(t)
		must(t, p.Put(ctx, "k", []byte("v1")))
		old := lookup(t, p, "k").Seq
		must(t, p.Put(ctx, "k", []byte("v2")))
		cleared, err := p.Confirm(ctx, "k", old)
		if err != nil || cleared {
			t.Fatalf("Confirm(k, older seq %d) = %v, %v; want false, nil", old, cleared, err)
		}
		e := lookup(t, p, "k")
		if !e.Pending() || string(e.Value) != "v2" {
			t.Fatalf("after a stale Confirm: Lookup = %+v, want v2, still pending", e)
		}
		cleared, err = p.Confirm(ctx, "k", e.Seq)
		if err != nil || !cleared {
			t.Fatalf("Confirm(k, current seq %d) = %v, %v; want true, nil", e.Seq, cleared, err)
		}
		if e := lookup(t, p, "k"); e.Pending() || string(e.Value) != "v2" {
			t.Fatalf("after Confirm: Lookup = %+v, want v2 without a mark", e)
		}
		if n := p.PendingCount(); n != 0 {
			t.Fatalf("after Confirm: PendingCount = %d, want 0", n)
		}
		cleared, err = p.Confirm(ctx, "k", e.Seq)
		if err != nil || cleared {
			t.Fatalf("second Confirm = %v, %v; want false, nil", cleared, err)
		}
		cleared, err = p.Confirm(ctx, "absent", 1)
		if err != nil || cleared {
			t.Fatalf("Confirm(absent) = %v, %v; want false, nil", cleared, err)
		}
	})

	t.Run("PendingKeysInOrder", func(t *testing.T) {
		p := open(t)
		var want []string
		for i := 9; i >= 0; i-- {
			k := fmt.Sprintf("k%02d", i)
			must(t, p.Put(ctx, k, []byte{byte(i)}))
			want = append(want, k)
		}
		slices.Sort(want)
		e := lookup(t, p, "k03")
		if _, err := p.Confirm(ctx, "k03", e.Seq); err != nil {
			t.Fatal(err)
		}
		want = slices.DeleteFunc(want, func(k string) bool { return k == "k03" })

		var got []string
		after := ""
		for range 20 {
			keys, err := p.PendingKeys(ctx, after, 3)
			if err != nil {
				t.Fatalf("PendingKeys(%q, 3): %v", after, err)
			}
			if len(keys) > 3 {
				t.Fatalf("PendingKeys(%q, 3) returned %d keys", after, len(keys))
			}
			if len(keys) == 0 {
				break
			}
			got = append(got, keys...)
			after = keys[len(keys)-1]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("pending keys in pages of 3: %v, want %v", got, want)
		}
		keys, err := p.PendingKeys(ctx, "k05", 100)
		if err != nil || !slices.Equal(keys, want[5:]) {
			t.Fatalf("PendingKeys(k05) = %v, %v; want %v", keys, err, want[5:])
		}
	})

	t.Run("KeysInOrder", func(t *testing.T) {
		p := open(t)
		var want []string
		for i := 9; i >= 0; i-- {
			k := fmt.Sprintf("k%02d", i)
			must(t, p.Put(ctx, k, []byte{byte(i)}))
			want = append(want, k)
		}
		must(t, p.Delete(ctx, "k04"))
		must(t, p.Delete(ctx, "never"))
		slices.Sort(want)
		want = slices.DeleteFunc(want, func(k string) bool { return k == "k04" })
		var got []string
		after := ""
		for range 20 {
			keys, err := p.Keys(ctx, after, 4)
			if err != nil {
				t.Fatalf("Keys(%q, 4): %v", after, err)
			}
			if len(keys) > 4 {
				t.Fatalf("Keys(%q, 4) returned %d keys", after, len(keys))
			}
			if len(keys) == 0 {
				break
			}
			got = append(got, keys...)
			after = keys[len(keys)-1]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("keys in pages of 4: %v, want %v (deleted keys left out)", got, want)
		}
	})

	t.Run("MarkKeepsTheValue", func(t *testing.T) {
		p := open(t)
		must(t, p.Put(ctx, "k", []byte("v")))
		e := lookup(t, p, "k")
		if _, err := p.Confirm(ctx, "k", e.Seq); err != nil {
			t.Fatal(err)
		}
		must(t, p.Mark(ctx, "k"))
		must(t, p.Mark(ctx, "absent"))
		got := lookup(t, p, "k")
		if !got.Found || string(got.Value) != "v" || got.Seq <= e.Seq {
			t.Fatalf("after Mark(k): Lookup = %+v, want v, pending with a sequence number above %d", got, e.Seq)
		}
		if got := lookup(t, p, "absent"); got.Found || !got.Pending() {
			t.Fatalf("after Mark(absent): Lookup = %+v, want absent and pending", got)
		}
		if n := p.PendingCount(); n != 2 {
			t.Fatalf("after two Marks: PendingCount = %d, want 2", n)
		}
		if err := p.Mark(ctx, ""); !errors.Is(err, replicate.ErrEmptyKey) {
			t.Fatalf("Mark with an empty key: %v, want ErrEmptyKey", err)
		}
	})

	t.Run("RebuildProgress", func(t *testing.T) {
		p := open(t)
		got, err := p.RebuildProgress(ctx)
		if err != nil || got != (replicate.Progress{}) {
			t.Fatalf("RebuildProgress of a new primary = %+v, %v; want the zero Progress", got, err)
		}
		for _, want := range []replicate.Progress{{Running: true}, {Running: true, After: "k\x00z"}, {}} {
			must(t, p.SetRebuildProgress(ctx, want))
			got, err := p.RebuildProgress(ctx)
			if err != nil || got != want {
				t.Fatalf("RebuildProgress after SetRebuildProgress(%+v) = %+v, %v", want, got, err)
			}
		}
		if n := p.PendingCount(); n != 0 {
			t.Fatalf("progress is not a pending key: PendingCount = %d", n)
		}
	})

	t.Run("ValuesAreCopied", func(t *testing.T) {
		p := open(t)
		buf := []byte("abc")
		must(t, p.Put(ctx, "k", buf))
		buf[0] = 'X'
		v, _, _ := p.Get(ctx, "k")
		if string(v) != "abc" {
			t.Fatalf("Put kept the caller's slice: Get = %q after the caller changed it", v)
		}
		v[1] = 'Y'
		if v2, _, _ := p.Get(ctx, "k"); string(v2) != "abc" {
			t.Fatalf("Get returned the stored slice: %q after the caller changed it", v2)
		}
	})

	t.Run("EmptyValue", func(t *testing.T) {
		p := open(t)
		must(t, p.Put(ctx, "k", nil))
		v, ok, err := p.Get(ctx, "k")
		if err != nil || !ok || len(v) != 0 {
			t.Fatalf("Get after Put(k, nil) = %q, %v, %v; want empty, true, nil", v, ok, err)
		}
		if e := lookup(t, p, "k"); !e.Found {
			t.Fatalf("Lookup after Put(k, nil) = %+v, want found", e)
		}
	})

	t.Run("EmptyKey", func(t *testing.T) {
		p := open(t)
		if err := p.Put(ctx, "", []byte("v")); !errors.Is(err, replicate.ErrEmptyKey) {
			t.Fatalf("Put with an empty key: %v, want ErrEmptyKey", err)
		}
		if err := p.Delete(ctx, ""); !errors.Is(err, replicate.ErrEmptyKey) {
			t.Fatalf("Delete with an empty key: %v, want ErrEmptyKey", err)
		}
		if n := p.PendingCount(); n != 0 {
			t.Fatalf("after rejected writes: PendingCount = %d, want 0", n)
		}
	})

	t.Run("ConcurrentWrites", func(t *testing.T) {
		p := open(t)
		const writers, each = 4, 50
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					k := fmt.Sprintf("k%d", i%10)
					var err error
					if i%5 == 4 {
						err = p.Delete(ctx, k)
					} else {
						err = p.Put(ctx, k, []byte(fmt.Sprintf("%d-%d", w, i)))
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if n := p.PendingCount(); n != 10 {
			t.Fatalf("after concurrent writes to 10 keys: PendingCount = %d, want 10", n)
		}
		seqs := map[uint64]string{}
		for i := range 10 {
			k := fmt.Sprintf("k%d", i)
			e := lookup(t, p, k)
			if other, dup := seqs[e.Seq]; dup {
				t.Fatalf("keys %s and %s carry the same sequence number %d", other, k, e.Seq)
			}
			seqs[e.Seq] = k
			if _, err := p.Confirm(ctx, k, e.Seq); err != nil {
				t.Fatal(err)
			}
		}
		if n := p.PendingCount(); n != 0 {
			t.Fatalf("after confirming every key: PendingCount = %d, want 0", n)
		}
	})

	t.Run("CanceledContext", func(t *testing.T) {
		p := open(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := p.Put(cctx, "k", []byte("v")); err == nil {
			t.Fatal("Put with a canceled context succeeded")
		}
		if n := p.PendingCount(); n != 0 {
			t.Fatalf("after a canceled Put: PendingCount = %d, want 0", n)
		}
	})
}

func lookup(t *testing.T, p replicate.Primary, key string) replicate.Entry {
	t.Helper()
	e, err := p.Lookup(context.Background(), key)
	if err != nil {
		t.Fatalf("Lookup(%q): %v", key, err)
	}
	return e
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

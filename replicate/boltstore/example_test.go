package boltstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fusebox-go/fusebox/replicate/boltstore"
)

// The outbox survives a restart: a key written and not yet confirmed is
// still pending when the file is opened again.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "boltstore")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "primary.db")

	s, err := boltstore.Open(path)
	if err != nil {
		panic(err)
	}
	_ = s.Put(ctx, "a", []byte("1"))
	_ = s.Put(ctx, "b", []byte("2"))
	e, _ := s.Lookup(ctx, "a")
	_, _ = s.Confirm(ctx, "a", e.Seq) // the replica confirmed a
	_ = s.Close()

	s, err = boltstore.Open(path)
	if err != nil {
		panic(err)
	}
	defer s.Close()
	keys, _ := s.PendingKeys(ctx, "", 10)
	fmt.Println("pending after the restart:", keys)
	v, _, _ := s.Get(ctx, "a")
	fmt.Println("a =", string(v))
	// Output:
	// pending after the restart: [b]
	// a = 1
}

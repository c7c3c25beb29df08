// Package boltstore is a replicate.Primary kept in a bbolt file: the data
// and the outbox of pending keys live in the same file and change in the
// same transaction, so a primary reopened after a crash or a restart still
// knows every key the replica has not confirmed.
//
// Each write is one bbolt read-write transaction, committed (and synced to
// disk) before it returns. The file holds two buckets, "data" (key to
// value) and "pending" (key to the 8-byte big-endian sequence number of the
// write that marked it); the sequence numbers come from the pending
// bucket's own sequence, which bbolt keeps in the file, so they keep
// growing across restarts.
package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fusebox-go/fusebox/replicate"
)

var (
	bucketData    = []byte("data")
	bucketPending = []byte("pending")
)

// OpenTimeout is how long Open waits for the file's lock, held by another
// process (or another Store of this one) that has the file open.
const OpenTimeout = time.Second

// errNoChange rolls back a transaction that found nothing to change, so
// that it costs no disk write.
var errNoChange = errors.New("boltstore: no change")

// Store is a replicate.Primary in a bbolt file. Open one with Open and
// close it with Close, after closing the Replicator that uses it. It is
// safe for concurrent use. The zero value is not usable.
type Store struct {
	db   *bolt.DB
	path string

	// writeMu serializes the writes so that pending counts exactly; bbolt
	// serializes read-write transactions anyway.
	writeMu sync.Mutex
	pending atomic.Int64

	closeOnce sync.Once
	closeErr  error
}

var _ replicate.Primary = (*Store)(nil)

// Open opens the bbolt file at path, creating it (mode 0600) and its
// buckets if needed, and counts its pending keys. It fails, with an error
// that names the path, if the file is not a bbolt file or is held by
// another Store for longer than OpenTimeout.
func Open(path string) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: OpenTimeout})
	if err != nil {
		return nil, fmt.Errorf("fusebox: boltstore: open %s: %w", path, err)
	}
	var n int
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketData); err != nil {
			return err
		}
		p, err := tx.CreateBucketIfNotExists(bucketPending)
		if err != nil {
			return err
		}
		n = p.Stats().KeyN
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("fusebox: boltstore: open %s: %w", path, err)
	}
	s := &Store{db: db, path: path}
	s.pending.Store(int64(n))
	return s, nil
}

// Path returns the path of the store's file.
func (s *Store) Path() string { return s.path }

// Close closes the file, after waiting for the transactions in progress.
// Afterwards every method returns an error (bbolt's ErrDatabaseNotOpen,
// wrapped). Calling Close more than once returns the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("fusebox: boltstore: close %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

// Put stores value under key and marks key pending, in one transaction
// committed to disk before Put returns.
func (s *Store) Put(ctx context.Context, key string, value []byte) error {
	return s.write(ctx, "put", key, func(data *bolt.Bucket) error {
		return data.Put([]byte(key), value)
	})
}

// Delete removes key and marks it pending, in one transaction committed to
// disk before Delete returns.
func (s *Store) Delete(ctx context.Context, key string) error {
	return s.write(ctx, "delete", key, func(data *bolt.Bucket) error {
		return data.Delete([]byte(key))
	})
}

// write applies change to the data bucket and marks key pending with the
// next sequence number, in one transaction.
func (s *Store) write(ctx context.Context, op, key string, change func(data *bolt.Bucket) error) error {
	if key == "" {
		return replicate.ErrEmptyKey
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	k := []byte(key)
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	added := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := change(tx.Bucket(bucketData)); err != nil {
			return err
		}
		p := tx.Bucket(bucketPending)
		seq, err := p.NextSequence()
		if err != nil {
			return err
		}
		added = p.Get(k) == nil
		return p.Put(k, binary.BigEndian.AppendUint64(nil, seq))
	})
	if err != nil {
		return fmt.Errorf("fusebox: boltstore: %s %q in %s: %w", op, key, s.path, err)
	}
	if added {
		s.pending.Add(1)
	}
	return nil
}

// Get returns a copy of the value stored under key.
func (s *Store) Get(ctx context.Context, key string) ([]byte, bool, error) {
	e, err := s.read(ctx, key, false)
	return e.Value, e.Found, err
}

// Lookup returns the key's current value and its pending mark, read in one
// transaction.
func (s *Store) Lookup(ctx context.Context, key string) (replicate.Entry, error) {
	return s.read(ctx, key, true)
}

func (s *Store) read(ctx context.Context, key string, mark bool) (replicate.Entry, error) {
	if err := ctx.Err(); err != nil {
		return replicate.Entry{}, err
	}
	var e replicate.Entry
	k := []byte(key)
	err := s.db.View(func(tx *bolt.Tx) error {
		// A cursor tells an empty value from an absent key.
		if fk, v := tx.Bucket(bucketData).Cursor().Seek(k); fk != nil && bytes.Equal(fk, k) {
			e.Value = append([]byte{}, v...)
			e.Found = true
		}
		if mark {
			if v := tx.Bucket(bucketPending).Get(k); v != nil {
				e.Seq = binary.BigEndian.Uint64(v)
			}
		}
		return nil
	})
	if err != nil {
		return replicate.Entry{}, fmt.Errorf("fusebox: boltstore: read %q from %s: %w", key, s.path, err)
	}
	return e, nil
}

// Confirm clears the key's pending mark if it still carries seq. A call
// that finds nothing to clear writes nothing to disk.
func (s *Store) Confirm(ctx context.Context, key string, seq uint64) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	k := []byte(key)
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	err := s.db.Update(func(tx *bolt.Tx) error {
		p := tx.Bucket(bucketPending)
		v := p.Get(k)
		if v == nil || binary.BigEndian.Uint64(v) != seq {
			return errNoChange
		}
		return p.Delete(k)
	})
	switch {
	case errors.Is(err, errNoChange):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("fusebox: boltstore: confirm %q in %s: %w", key, s.path, err)
	}
	s.pending.Add(-1)
	return true, nil
}

// PendingKeys returns up to limit pending keys greater than after, in
// order.
func (s *Store) PendingKeys(ctx context.Context, after string, limit int) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	var keys []string
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketPending).Cursor()
		k, _ := c.Seek([]byte(after))
		if k != nil && string(k) == after {
			k, _ = c.Next()
		}
		for ; k != nil && len(keys) < limit; k, _ = c.Next() {
			keys = append(keys, string(k))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fusebox: boltstore: list pending keys of %s: %w", s.path, err)
	}
	return keys, nil
}

// PendingCount returns how many keys are pending.
func (s *Store) PendingCount() int { return int(s.pending.Load()) }

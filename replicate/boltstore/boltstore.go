// Package boltstore is a replicate.Primary kept in a bbolt file: the data
// and the outbox of pending keys live in the same file and change in the
// same transaction, so a primary reopened after a crash or a restart still
// knows every key the replica has not confirmed.
//
// # Durability
//
// A Put or Delete that returned nil is on disk, value and pending mark
// together: its transaction was committed, and the file synced (fdatasync),
// before it returned. One that returned an error wrote nothing. Confirm,
// too, returns once the cleared mark is on disk. A crash loses only writes
// that had not returned yet, and each of those is wholly there or wholly
// absent.
//
// # Group commit
//
// Writes are not committed one by one: a Store has one goroutine that
// commits, and each commit takes every write queued since the previous one
// (up to MaxBatch), Puts, Deletes and Confirms alike, in one transaction
// and one sync. A lone writer pays one sync per write, as before; N
// concurrent writers share their syncs, so that their throughput grows
// almost N-fold while each write still returns only once it is on disk.
// A commit starts as soon as the previous one ends, except that it waits,
// for at most a quarter of the previous commit's duration, for the writers
// that commit released to queue their next writes, joining those that
// queued while it ran: so a crowd keeps sharing one commit, or comes
// together again, instead of splitting into groups that take turns.
//
// # Layout
//
// The file holds three buckets: "data" (key to value), "pending" (key to
// the 8-byte big-endian sequence number of the write that marked it) and
// "meta" (under "rebuild", the progress of a rebuild: a byte, 1 while one
// runs, then the last key it dealt with). The sequence numbers come from
// the pending bucket's own sequence, which bbolt keeps in the file, so they
// keep growing across restarts.
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
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/fusebox-go/fusebox/replicate"
)

var (
	bucketData    = []byte("data")
	bucketPending = []byte("pending")
	bucketMeta    = []byte("meta")
	keyRebuild    = []byte("rebuild")
)

// OpenTimeout is how long Open waits for the file's lock, held by another
// process (or another Store of this one) that has the file open.
const OpenTimeout = time.Second

// openTimeout is the OpenTimeout Open uses; the package's tests shorten it.
var openTimeout = OpenTimeout

// MaxBatch is the most writes one commit takes; the rest wait for the
// next commit.
const MaxBatch = 1000

// Store is a replicate.Primary in a bbolt file. Open one with Open and
// close it with Close, after closing the Replicator that uses it. It is
// safe for concurrent use. The zero value is not usable.
type Store struct {
	db   *bolt.DB
	path string

	// queue holds the writes waiting for the next commit; closed is set
	// by Close, after which nothing is queued. Both are guarded by mu.
	mu     sync.Mutex
	queue  []*op
	closed bool
	wake   chan struct{} // one slot: something was queued, or Close
	done   chan struct{} // closed when the committer returns

	// pending counts the pending marks; only the committer changes it.
	pending atomic.Int64
	// commits counts the transactions committed, for the benchmarks.
	commits atomic.Uint64

	closeOnce sync.Once
	closeErr  error
}

var _ replicate.Primary = (*Store)(nil)

// Open opens the bbolt file at path, creating it (mode 0600) and its
// buckets if needed, counts its pending keys and starts the goroutine that
// commits the writes. It fails, with an error that names the path, if the
// file is not a bbolt file or is held by another Store for longer than
// OpenTimeout; that error says that the file is in use by another process
// (errors.Is(err, bbolt's errors.ErrTimeout) holds).
func Open(path string) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: openTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		// bbolt says only "timeout": it waited for the file's lock.
		return nil, fmt.Errorf("fusebox: boltstore: open %s: the file is in use by another process, or by another Store of this one (its lock was not free within %v): %w", path, openTimeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("fusebox: boltstore: open %s: %w", path, err)
	}
	var n int
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketData); err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(bucketMeta); err != nil {
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
	s := &Store{db: db, path: path, wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.pending.Store(int64(n))
	go s.commitLoop()
	return s, nil
}

// Path returns the path of the store's file.
func (s *Store) Path() string { return s.path }

// Close commits the writes already queued, stops the committing goroutine
// and closes the file, after waiting for the reads in progress.
// Afterwards every method returns an error (bbolt's ErrDatabaseNotOpen,
// wrapped). Calling Close more than once returns the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.signal()
		<-s.done
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("fusebox: boltstore: close %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

// Put stores value under key and marks key pending, in one transaction
// committed to disk before Put returns. A nil ctx is an error
// (replicate.ErrNilContext); so is a key longer than bbolt's MaxKeySize.
func (s *Store) Put(ctx context.Context, key string, value []byte) error {
	return s.write(ctx, &op{kind: opPut, key: []byte(key), value: value})
}

// Delete removes key and marks it pending, in one transaction committed to
// disk before Delete returns.
func (s *Store) Delete(ctx context.Context, key string) error {
	return s.write(ctx, &op{kind: opDelete, key: []byte(key)})
}

// Mark marks key pending with a new sequence number, leaving its value or
// absence as it is, in a transaction committed to disk before Mark
// returns.
func (s *Store) Mark(ctx context.Context, key string) error {
	return s.write(ctx, &op{kind: opMark, key: []byte(key)})
}

// write checks a Put, Delete or Mark and has it committed.
func (s *Store) write(ctx context.Context, o *op) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if len(o.key) == 0 {
		return replicate.ErrEmptyKey
	}
	if len(o.key) > bolt.MaxKeySize {
		return fmt.Errorf("fusebox: boltstore: %s in %s: the key is %d bytes long, more than bbolt's %d", o.kind, s.path, len(o.key), bolt.MaxKeySize)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.commit(o); err != nil {
		return fmt.Errorf("fusebox: boltstore: %s %q in %s: %w", o.kind, o.key, s.path, err)
	}
	return nil
}

// checkCtx rejects a nil context, which the methods would otherwise
// dereference.
func checkCtx(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("fusebox: boltstore: %w", replicate.ErrNilContext)
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
	if err := checkCtx(ctx); err != nil {
		return replicate.Entry{}, err
	}
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
			e.Seq = markOf(tx, k)
		}
		return nil
	})
	if err != nil {
		return replicate.Entry{}, fmt.Errorf("fusebox: boltstore: read %q from %s: %w", key, s.path, err)
	}
	return e, nil
}

// markOf returns the sequence number of key's pending mark, 0 if none.
func markOf(tx *bolt.Tx, key []byte) uint64 {
	if v := tx.Bucket(bucketPending).Get(key); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// Confirm clears the key's pending mark if it still carries seq, and
// returns once that is on disk. A call that finds nothing to clear writes
// nothing and waits for no commit.
func (s *Store) Confirm(ctx context.Context, key string, seq uint64) (bool, error) {
	if err := checkCtx(ctx); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	k := []byte(key)
	// A mark only ever changes to a higher number, so one that is not
	// seq now never will be: no need to queue for a commit.
	var cur uint64
	if err := s.db.View(func(tx *bolt.Tx) error { cur = markOf(tx, k); return nil }); err != nil {
		return false, fmt.Errorf("fusebox: boltstore: confirm %q in %s: %w", key, s.path, err)
	}
	if cur != seq || seq == 0 {
		return false, nil
	}
	o := &op{kind: opConfirm, key: k, seq: seq}
	if err := s.commit(o); err != nil {
		return false, fmt.Errorf("fusebox: boltstore: confirm %q in %s: %w", key, s.path, err)
	}
	return o.cleared, nil
}

// PendingKeys returns up to limit pending keys greater than after, in
// order.
func (s *Store) PendingKeys(ctx context.Context, after string, limit int) ([]string, error) {
	keys, err := s.keysAfter(ctx, bucketPending, after, limit)
	if err != nil {
		return nil, fmt.Errorf("fusebox: boltstore: list pending keys of %s: %w", s.path, err)
	}
	return keys, nil
}

// Keys returns up to limit keys of the data greater than after, in order.
func (s *Store) Keys(ctx context.Context, after string, limit int) ([]string, error) {
	keys, err := s.keysAfter(ctx, bucketData, after, limit)
	if err != nil {
		return nil, fmt.Errorf("fusebox: boltstore: list keys of %s: %w", s.path, err)
	}
	return keys, nil
}

// keysAfter returns up to limit keys of bucket greater than after, in
// order, read in one short transaction.
func (s *Store) keysAfter(ctx context.Context, bucket []byte, after string, limit int) ([]string, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	var keys []string
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		k, _ := c.Seek([]byte(after))
		if k != nil && string(k) == after {
			k, _ = c.Next()
		}
		for ; k != nil && len(keys) < limit; k, _ = c.Next() {
			keys = append(keys, string(k))
		}
		return nil
	})
	return keys, err
}

// RebuildProgress returns the progress of a rebuild recorded in the file.
func (s *Store) RebuildProgress(ctx context.Context) (replicate.Progress, error) {
	if err := checkCtx(ctx); err != nil {
		return replicate.Progress{}, err
	}
	var p replicate.Progress
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyRebuild); len(v) > 0 {
			p = replicate.Progress{Running: v[0] == 1, After: string(v[1:])}
		}
		return nil
	})
	if err != nil {
		return replicate.Progress{}, fmt.Errorf("fusebox: boltstore: read the rebuild's progress from %s: %w", s.path, err)
	}
	return p, nil
}

// SetRebuildProgress records p in the file, committed to disk before it
// returns.
func (s *Store) SetRebuildProgress(ctx context.Context, p replicate.Progress) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	v := []byte{0}
	if p.Running {
		v[0] = 1
	}
	if err := s.commit(&op{kind: opProgress, value: append(v, p.After...)}); err != nil {
		return fmt.Errorf("fusebox: boltstore: record the rebuild's progress in %s: %w", s.path, err)
	}
	return nil
}

// PendingCount returns how many keys are pending.
func (s *Store) PendingCount() int { return int(s.pending.Load()) }

// opKind is what a queued write does.
type opKind uint8

const (
	opPut opKind = iota + 1
	opDelete
	opConfirm
	opMark
	opProgress
)

func (k opKind) String() string {
	switch k {
	case opPut:
		return "put"
	case opDelete:
		return "delete"
	case opConfirm:
		return "confirm"
	case opMark:
		return "mark"
	case opProgress:
		return "rebuild progress"
	}
	return "write"
}

// op is one write waiting for a commit. The writer fills in the request,
// the committer the results, and closes done when they are final.
type op struct {
	kind  opKind
	key   []byte
	value []byte // opPut; the writer keeps it alive until done
	seq   uint64 // opConfirm: the mark to clear

	err     error
	added   bool // opPut, opDelete: the key had no pending mark before
	cleared bool // opConfirm: the mark was cleared
	done    chan struct{}
}

// commit queues o for the next commit and waits until it is on disk, or
// failed.
func (s *Store) commit(o *op) error {
	o.done = make(chan struct{})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return bolterrors.ErrDatabaseNotOpen
	}
	s.queue = append(s.queue, o)
	s.mu.Unlock()
	s.signal()
	<-o.done
	return o.err
}

// signal wakes the committer, unless it already has a wake-up waiting.
func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// commitLoop is the committer: it commits whatever is queued, batch after
// batch, and returns once Close has been called and the queue is empty.
//
// Writers released together come back together: left alone, the writers
// released by one commit would all queue for the commit after next, while
// the next one carries only those that were quicker, and the crowd would
// settle into groups that take turns, each write waiting for two commits.
// So before a commit the committer waits for as many writes as there were
// writers in sight when the previous commit ended: those it released and
// those that queued while it ran. It waits no longer than a quarter of
// that commit's duration, and not at all for an empty queue or a lone
// writer (who is back at once).
//
// Waiting only for the writers the previous commit released is not
// enough: once a crowd has split, each group waits for itself and the
// groups never merge. A write through a Replicator with a healthy replica
// (a Put, then its confirmation, with the replica's call in between) does
// split 16 writers so, into commits of about 9 (BenchmarkScaling's
// syncs/write(16) was 0.20, where one commit per crowd makes 0.125);
// counting the queued ones too brings most commits back to the whole
// crowd (0.15).
// The estimate cannot run away: every write counted is a writer blocked
// in commit, and one that does not come back costs one wait, after which
// the next estimate leaves it out.
func (s *Store) commitLoop() {
	defer close(s.done)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	var (
		expect  int           // writers in sight when the last commit ended
		lastDur time.Duration // how long it took
	)
	for {
		s.mu.Lock()
		if n := len(s.queue); n > 0 && n < expect && !s.closed {
			s.mu.Unlock()
			linger.Reset(lastDur / 4)
			if s.gather(linger, expect) {
				linger.Stop()
			}
			expect = 0 // whoever is queued now goes
			continue
		}
		batch := s.queue
		if len(batch) > MaxBatch {
			batch, s.queue = batch[:MaxBatch:MaxBatch], batch[MaxBatch:]
		} else {
			s.queue = nil
		}
		closed := s.closed
		s.mu.Unlock()
		switch {
		case len(batch) > 0:
			start := time.Now()
			s.commitBatch(batch)
			lastDur = time.Since(start)
			s.mu.Lock()
			expect = min(len(batch)+len(s.queue), MaxBatch)
			s.mu.Unlock()
		case closed:
			return
		default:
			<-s.wake
		}
	}
}

// gather waits until expect writes are queued, Close is called or the
// linger timer fires; it reports whether the timer is still running.
func (s *Store) gather(linger *time.Timer, expect int) (running bool) {
	for {
		select {
		case <-linger.C:
			return false
		case <-s.wake:
		}
		s.mu.Lock()
		enough := len(s.queue) >= expect || s.closed
		s.mu.Unlock()
		if enough {
			return true
		}
	}
}

// commitBatch applies the writes of batch in one transaction and commits
// it. If one write fails, the transaction is rolled back and each write is
// committed alone, so that one bad write does not fail the others.
func (s *Store) commitBatch(batch []*op) {
	err := s.transact(batch)
	if err != nil && len(batch) > 1 && !errors.Is(err, errCommit) {
		for _, o := range batch {
			s.commitBatch([]*op{o})
		}
		return
	}
	for _, o := range batch {
		if err != nil {
			o.err, o.added, o.cleared = err, false, false
		}
		switch {
		case o.added:
			s.pending.Add(1)
		case o.cleared:
			s.pending.Add(-1)
		}
		close(o.done)
	}
}

// errCommit marks the failure of the commit itself (a full disk, say),
// which committing the writes one by one would not cure.
var errCommit = errors.New("commit")

// transact applies batch in one read-write transaction and commits it,
// unless nothing changed: then it rolls back, which costs no disk write.
func (s *Store) transact(batch []*op) error {
	tx, err := s.db.Begin(true)
	if err != nil {
		return fmt.Errorf("%w: %w", errCommit, err)
	}
	changed := false
	for _, o := range batch {
		c, err := apply(tx, o)
		if err != nil {
			_ = tx.Rollback()
			return err
		}
		changed = changed || c
	}
	if !changed {
		return tx.Rollback()
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: %w", errCommit, err)
	}
	s.commits.Add(1)
	return nil
}

// apply makes the change of o in tx, and reports whether it changed
// anything.
func apply(tx *bolt.Tx, o *op) (changed bool, err error) {
	o.added, o.cleared = false, false
	data, pending := tx.Bucket(bucketData), tx.Bucket(bucketPending)
	switch o.kind {
	case opPut:
		err = data.Put(o.key, o.value)
	case opDelete:
		err = data.Delete(o.key)
	case opMark:
	case opProgress:
		return true, tx.Bucket(bucketMeta).Put(keyRebuild, o.value)
	case opConfirm:
		v := pending.Get(o.key)
		if v == nil || binary.BigEndian.Uint64(v) != o.seq {
			return false, nil
		}
		if err := pending.Delete(o.key); err != nil {
			return false, err
		}
		o.cleared = true
		return true, nil
	}
	if err != nil {
		return false, err
	}
	seq, err := pending.NextSequence()
	if err != nil {
		return false, err
	}
	added := pending.Get(o.key) == nil
	if err := pending.Put(o.key, binary.BigEndian.AppendUint64(nil, seq)); err != nil {
		return false, err
	}
	o.added = added
	return true, nil
}

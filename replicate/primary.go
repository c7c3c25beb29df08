package replicate

import (
	"context"
	"errors"
)

// Replica is where a Replicator copies the writes. Both methods must honour
// ctx: once ctx is done they return its error promptly, and a call that has
// returned must not take effect afterwards (otherwise an old value could
// land after a newer one). Put must not modify value or keep it after
// returning. Deleting an absent key must succeed. Writing a value the
// replica already holds must succeed too: catch-up may send a key again.
type Replica interface {
	Put(ctx context.Context, key string, value []byte) error
	Delete(ctx context.Context, key string) error
}

// Primary is the local store a Replicator writes to first. Besides the data
// it keeps an outbox: a pending mark for every key whose latest write the
// replica has not confirmed yet, carrying the sequence number of that
// write.
//
// Every Put and Delete stores the change and marks the key pending with a
// new sequence number in one atomic step: after it returns nil, both are
// there; after it returns an error, neither. The sequence numbers of a
// Primary grow with every write and are never reused, across restarts too
// for a durable Primary, so that a mark set by a newer write is never
// mistaken for an older one. Implementations must be safe for concurrent
// use. ctx may be checked before the work starts; a Primary need not stop a
// write half way.
//
// A Primary serves one Replicator at a time.
type Primary interface {
	// Put stores value under key and marks key pending. It must not keep
	// value: the caller may reuse it. An empty key is an error.
	Put(ctx context.Context, key string, value []byte) error
	// Delete removes key and marks it pending; deleting an absent key is
	// a write like any other. An empty key is an error.
	Delete(ctx context.Context, key string) error
	// Get returns a copy of the value stored under key, and whether the
	// key exists.
	Get(ctx context.Context, key string) (value []byte, ok bool, err error)
	// Lookup returns the key's current value and its pending mark, read
	// together. The caller must not modify Entry.Value.
	Lookup(ctx context.Context, key string) (Entry, error)
	// Confirm clears the key's pending mark if its sequence number is
	// still seq, and reports whether it did. A newer write re-marked the
	// key if it did not; that is not an error.
	Confirm(ctx context.Context, key string, seq uint64) (cleared bool, err error)
	// PendingKeys returns up to limit pending keys greater than after, in
	// increasing order. Pass "" to start from the first.
	PendingKeys(ctx context.Context, after string, limit int) ([]string, error)
	// PendingCount returns how many keys are pending.
	PendingCount() int

	// Keys returns up to limit keys that exist, greater than after, in
	// increasing byte order. Pass "" to start from the first. Rebuild
	// walks the primary with it.
	Keys(ctx context.Context, after string, limit int) ([]string, error)
	// Mark marks key pending with a new sequence number, leaving its
	// value (or its absence) as it is: Rebuild hands catch-up a key the
	// replica did not take. An empty key is an error.
	Mark(ctx context.Context, key string) error
	// RebuildProgress returns the progress that SetRebuildProgress last
	// recorded; the zero Progress if none was.
	RebuildProgress(ctx context.Context) (Progress, error)
	// SetRebuildProgress records p; a durable Primary keeps it across
	// restarts, as it keeps the pending marks.
	SetRebuildProgress(ctx context.Context, p Progress) error
}

// Progress is where a rebuild stands, as the Primary records it, so that a
// rebuild cut short (by its context, by the breaker, or by a crash) goes on
// where it stopped.
type Progress struct {
	// Running reports that a rebuild has started and not finished.
	Running bool
	// After is the last key the rebuild dealt with (sent to the replica,
	// or handed to catch-up); the rebuild goes on with the keys after it.
	// "" before the first key.
	After string
}

// Lister is what a Replica implements, besides Replica, to list the keys
// it holds. Rebuild uses it to delete from the replica the keys that the
// primary does not hold; without it, Rebuild sends only the primary's keys
// (and catch-up the deletes still pending), so that keys deleted from the
// primary while the replica was not told (a replica restored from an old
// backup) stay on the replica.
type Lister interface {
	// ListKeys returns up to limit keys the replica holds, greater than
	// after, in increasing byte order; "" starts from the first. It must
	// honour ctx, like the methods of Replica.
	ListKeys(ctx context.Context, after string, limit int) ([]string, error)
}

// Entry is what Primary.Lookup returns: a key's current value and its
// pending mark.
type Entry struct {
	// Value is the current value; nil when the key is absent.
	Value []byte
	// Found reports whether the key exists.
	Found bool
	// Seq is the sequence number of the key's pending mark, or 0 if the
	// replica has confirmed the key's latest write.
	Seq uint64
}

// Pending reports whether the entry carries a pending mark.
func (e Entry) Pending() bool { return e.Seq != 0 }

// ErrEmptyKey is returned for a write with an empty key.
var ErrEmptyKey = errors.New("fusebox: replicate: the key must not be empty")

// ErrNilContext is returned, wrapped, by every method given a nil
// context, of a Replicator and of the Primaries of this module.
var ErrNilContext = errors.New("fusebox: replicate: the context must not be nil")

// ErrClosed is returned by the methods of a closed Replicator, and is the
// Result.Cause of a copy cut short by Close.
var ErrClosed = errors.New("fusebox: replicate: replicator closed")

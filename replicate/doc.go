// Package replicate keeps a key-value primary and copies every write to a
// replica through a circuit breaker, so that a replica that hangs cannot
// make the primary slow.
//
// # The problem
//
// A replica that is down fails each call at once; one that hangs (a long
// pause, a stuck disk, a network that drops packets) makes each call wait
// for its whole timeout, and every write on the primary waits with it. A
// Replicator puts the replica behind a *manager.Breaker: after a few
// timeouts the breaker opens and writes stop waiting; the keys the replica
// missed are remembered in the primary; once a trial call gets through, the
// replica receives their current values.
//
// # The pieces
//
//   - Primary is the local store. Each write stores the value and marks the
//     key pending, with a new sequence number, in one atomic step: the
//     outbox. NewMemory returns one kept in memory; package boltstore keeps
//     one in a bbolt file, so that the pending marks survive a restart.
//   - Replica is where the copies go: two methods, Put and Delete, that must
//     honour their context.
//   - Replicator writes to the primary, then copies the key's current value
//     to the replica through the breaker, and clears the pending mark once
//     the replica confirms, unless a newer write marked the key again
//     meanwhile. A goroutine of its own catches up on pending keys; Pending
//     counts them and Wait waits until there are none. Rebuild sends the
//     replica every key of the primary, for a replica that is new, wiped or
//     restored from an old backup (catch-up knows only pending keys); a
//     replica that is also a Lister has the keys the primary does not hold
//     deleted.
//
// # Panics and bad input
//
// A nil context is an error wrapping ErrNilContext. A Replica or a breaker
// Classifier that panics is recovered, on the caller's goroutine and on the
// replicator's: the call counts as one failure, the key stays pending, the
// write's Result.Cause is a *PanicError and Options.Logger gets a report.
//
// Package replicatetest has a replica for tests, whose calls can be made to
// hang or fail, and conformance tests for a Primary of your own.
//
// # Using it
//
//	m := manager.Start(manager.Options{})
//	defer m.Stop()
//	b, err := m.Register("replica", manager.Config{
//		Strategy: breaker.Consecutive{Failures: 3},
//		Recover:  recover.BasicTimeout{Open: time.Second},
//	})
//	...
//	primary, err := boltstore.Open("primary.db")
//	...
//	r, err := replicate.New(primary, replica, b, replicate.Options{
//		Timeout: 50 * time.Millisecond,
//		Manager: m,
//	})
//	...
//	defer primary.Close()
//	defer r.Close()
//	res, err := r.Put(ctx, "a", []byte("1"))
//	// err != nil: the primary write failed, nothing was written.
//	// !res.Replicated: the key is pending; res.Cause says why.
//
// # Catch-up
//
// Catch-up sends the current value of each pending key, in key order, one
// key at a time with a pause between sends (Options.CatchUpPause), skipping
// keys that a live write is copying at that moment; a key that is now
// absent is sent as a delete. It runs when the replicator starts with keys
// pending, after every write that gets through while keys are pending, and
// when the breaker turns half_open: the replicator then makes the trial call
// itself with the first pending key, so recovery does not wait for the next
// write. It stops as soon as the breaker declines a call.
//
// New takes the breaker, not its manager, so it learns of half_open from
// the manager's events only when Options.Manager is set; otherwise it looks
// at the breaker's state every Options.WatchInterval while keys are
// pending and the breaker is not closed.
//
// # Order
//
// Copies of one key are sent one at a time, and each sends the value the
// primary holds when it starts, so the replica never receives an older value
// of a key after a newer one. This relies on the Replica honouring its
// context: a call that returned must not take effect later. Across keys
// there is no order: see docs/replicate.md for what a reader of the replica
// may see while it catches up.
package replicate

// Package replicatetest provides what tests of code built on package
// replicate need: Replica, an in-memory replica whose failures are switched
// on and off by hand, and TestPrimary, which checks that an implementation
// of replicate.Primary keeps the outbox's promises.
package replicatetest

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// ErrDown is the error a failing Replica returns when Fail was given none.
var ErrDown = errors.New("replicatetest: replica is down")

type mode uint8

const (
	healthy mode = iota
	hanging
	failing
)

// Change is one write a Replica applied.
type Change struct {
	// Value is the value put; nil for a delete.
	Value []byte
	// Deleted is set for a delete.
	Deleted bool
}

// Replica is an in-memory replicate.Replica with three modes: healthy (the
// zero mode), hanging (Hang: each call blocks until its context is done, as
// with a stuck disk or a network that drops packets) and failing (Fail:
// each call returns an error at once, as with a replica that is down). Heal
// returns it to healthy. Calls that are hanging when the mode changes go on
// in the new mode: Heal lets them apply their write, Fail makes them fail.
// A call whose context is done before it is applied changes nothing.
//
// Replica records every write it applies, per key, for tests of write
// order. It is safe for concurrent use; the zero value is not usable, call
// NewReplica.
type Replica struct {
	mu      sync.Mutex
	mode    mode
	failErr error
	wake    chan struct{} // closed when the replica stops hanging
	data    map[string][]byte
	history map[string][]Change
	calls   int
	hung    int
	latency time.Duration
}

// NewReplica returns an empty, healthy Replica.
func NewReplica() *Replica {
	return &Replica{data: make(map[string][]byte), history: make(map[string][]Change)}
}

// Put stores a copy of value under key, unless the replica hangs or fails.
func (r *Replica) Put(ctx context.Context, key string, value []byte) error {
	v := make([]byte, len(value))
	copy(v, value)
	return r.apply(ctx, key, Change{Value: v})
}

// Delete removes key, unless the replica hangs or fails. Deleting an
// absent key succeeds.
func (r *Replica) Delete(ctx context.Context, key string) error {
	return r.apply(ctx, key, Change{Deleted: true})
}

func (r *Replica) apply(ctx context.Context, key string, c Change) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.latency > 0 {
		d := rand.N(r.latency)
		r.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		r.mu.Lock()
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch r.mode {
		case failing:
			return r.failErr
		case hanging:
			wake := r.wake
			r.hung++
			r.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-wake:
			}
			r.mu.Lock()
			r.hung--
			continue
		}
		if c.Deleted {
			delete(r.data, key)
		} else {
			r.data[key] = c.Value
		}
		r.history[key] = append(r.history[key], c)
		return nil
	}
}

// Hang makes every call block until its context is done, or until Heal or
// Fail. Calling Hang while hanging does nothing.
func (r *Replica) Hang() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mode != hanging {
		r.mode = hanging
		r.wake = make(chan struct{})
	}
}

// Fail makes every call return err at once (ErrDown if err is nil),
// hanging calls included.
func (r *Replica) Fail(err error) {
	if err == nil {
		err = ErrDown
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setMode(failing)
	r.failErr = err
}

// Heal returns the replica to normal: every call, hanging ones included,
// applies its write.
func (r *Replica) Heal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setMode(healthy)
}

func (r *Replica) setMode(m mode) {
	if r.mode == hanging {
		close(r.wake)
	}
	r.mode = m
}

// SetLatency makes every call wait a random time below max (or until its
// context is done) before it is handled; zero turns the latency off. A
// little latency makes the interleavings of concurrent calls vary.
func (r *Replica) SetLatency(max time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latency = max
}

// ListKeys returns up to limit keys the replica holds, greater than
// after, in increasing order: Replica is a replicate.Lister, so that
// Rebuild deletes what the primary does not hold. It answers whatever the
// mode (only writes hang or fail), unless ctx is done.
func (r *Replica) ListKeys(ctx context.Context, after string, limit int) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	var keys []string
	for k := range r.data {
		if k > after {
			keys = append(keys, k)
		}
	}
	r.mu.Unlock()
	slices.Sort(keys)
	if len(keys) > limit {
		keys = keys[:max(limit, 0)]
	}
	return keys, nil
}

// Wipe empties the replica, as a replica that lost its data; History
// keeps what it applied before.
func (r *Replica) Wipe() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.data)
}

// Get returns the value the replica holds under key.
func (r *Replica) Get(key string) ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.data[key]
	if !ok {
		return nil, false
	}
	return append([]byte{}, v...), true
}

// Snapshot returns everything the replica holds, values as strings.
func (r *Replica) Snapshot() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]string, len(r.data))
	for k, v := range r.data {
		m[k] = string(v)
	}
	return m
}

// History returns the writes of key the replica applied, oldest first.
func (r *Replica) History(key string) []Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Change(nil), r.history[key]...)
}

// Keys returns, sorted, every key the replica has applied a write to.
func (r *Replica) Keys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.history))
}

// Calls returns how many calls the replica has received, whatever became
// of them.
func (r *Replica) Calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// Hung returns how many calls are blocked in the hanging mode right now.
func (r *Replica) Hung() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hung
}

package replicate

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// memory is the Primary returned by NewMemory.
type memory struct {
	mu       sync.RWMutex
	data     map[string][]byte // values are never modified once stored
	pending  map[string]uint64
	seq      uint64
	progress Progress
}

// NewMemory returns a Primary kept in memory: safe for concurrent use, fast,
// and lost with the process, pending marks included. Use it in tests, or
// where the replica holds everything that must survive; package boltstore
// keeps the data and the outbox in a file. Listing keys (pending ones for
// catch-up, all of them for Rebuild) sorts them, which suits sets of up to
// some tens of thousands of keys.
func NewMemory() Primary {
	return &memory{data: make(map[string][]byte), pending: make(map[string]uint64)}
}

func (m *memory) Put(ctx context.Context, key string, value []byte) error {
	if key == "" {
		return ErrEmptyKey
	}
	if err := ctxErr(ctx); err != nil {
		return err
	}
	v := make([]byte, len(value))
	copy(v, value)
	m.mu.Lock()
	m.seq++
	m.data[key] = v
	m.pending[key] = m.seq
	m.mu.Unlock()
	return nil
}

func (m *memory) Delete(ctx context.Context, key string) error {
	if key == "" {
		return ErrEmptyKey
	}
	if err := ctxErr(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	m.seq++
	delete(m.data, key)
	m.pending[key] = m.seq
	m.mu.Unlock()
	return nil
}

func (m *memory) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, false, err
	}
	m.mu.RLock()
	v, ok := m.data[key]
	m.mu.RUnlock()
	if !ok {
		return nil, false, nil
	}
	return bytes.Clone(v), true, nil
}

func (m *memory) Lookup(ctx context.Context, key string) (Entry, error) {
	if err := ctxErr(ctx); err != nil {
		return Entry{}, err
	}
	m.mu.RLock()
	v, ok := m.data[key]
	seq := m.pending[key]
	m.mu.RUnlock()
	return Entry{Value: v, Found: ok, Seq: seq}, nil
}

func (m *memory) Confirm(ctx context.Context, key string, seq uint64) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.pending[key]; !ok || cur != seq {
		return false, nil
	}
	delete(m.pending, key)
	return true, nil
}

func (m *memory) PendingKeys(ctx context.Context, after string, limit int) ([]string, error) {
	return listAfter(ctx, &m.mu, m.pending, after, limit)
}

func (m *memory) Keys(ctx context.Context, after string, limit int) ([]string, error) {
	return listAfter(ctx, &m.mu, m.data, after, limit)
}

// listAfter returns up to limit keys of km greater than after, in order.
func listAfter[V any](ctx context.Context, mu *sync.RWMutex, km map[string]V, after string, limit int) ([]string, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	mu.RLock()
	keys := make([]string, 0, min(len(km), 4*limit))
	for k := range km {
		if k > after {
			keys = append(keys, k)
		}
	}
	mu.RUnlock()
	slices.SortFunc(keys, strings.Compare)
	if len(keys) > limit {
		keys = keys[:limit:limit]
	}
	return keys, nil
}

func (m *memory) Mark(ctx context.Context, key string) error {
	if key == "" {
		return ErrEmptyKey
	}
	if err := ctxErr(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	m.seq++
	m.pending[key] = m.seq
	m.mu.Unlock()
	return nil
}

func (m *memory) RebuildProgress(ctx context.Context) (Progress, error) {
	if err := ctxErr(ctx); err != nil {
		return Progress{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.progress, nil
}

func (m *memory) SetRebuildProgress(ctx context.Context, p Progress) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	m.progress = p
	m.mu.Unlock()
	return nil
}

func (m *memory) PendingCount() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.pending)
}

// ctxErr is ctx.Err(), and an error for a nil ctx.
func ctxErr(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("fusebox: replicate: memory primary: %w", ErrNilContext)
	}
	return ctx.Err()
}

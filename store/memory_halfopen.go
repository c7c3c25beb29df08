package store

import "context"

// HalfOpen implements HalfOpener.
func (m *Memory) HalfOpen(ctx context.Context, name string, epoch uint64) (Status, bool, error) {
	r, err := m.do(ctx, name, opHalfOpen{epoch: epoch})
	return r.Status, r.applied, err
}

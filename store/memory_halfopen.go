package store

import (
	"context"
	"time"
)

// HalfOpen implements HalfOpener.
func (m *Memory) HalfOpen(ctx context.Context, name string, epoch uint64) (Status, bool, error) {
	if err := ctx.Err(); err != nil {
		return Status{}, false, err
	}
	now := m.clk.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.entry(name)
	st := b.status(now)
	if epoch != b.epoch || !st.Opened() || st.Forced || st.Open == 0 || st.Probe > 0 {
		return st, false, nil
	}
	b.epoch += 2
	b.openTo, b.probe, b.probeTo = time.Time{}, "", time.Time{}
	m.publish(Change{Name: name, Kind: Opened, Epoch: b.epoch, Reason: b.why})
	return b.status(now), true, nil
}

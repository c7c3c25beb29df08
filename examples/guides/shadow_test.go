package guides_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// This file calls the builtin recover(), so it imports package recover
// under another name, as docs/recover.md shows.

import fbrecover "github.com/fusebox-go/fusebox/recover"

// fallback wraps a policy so that a panic in its Timeout gives a fixed
// period instead of restarting the manager.
type fallback struct {
	fbrecover.Recover
	period time.Duration
}

func (f fallback) Timeout(c fbrecover.Context, state any) (d time.Duration, next any) {
	defer func() {
		if v := recover(); v != nil {
			d, next = f.period, state
		}
	}()
	return f.Recover.Timeout(c, state)
}

func TestFallback(t *testing.T) {
	broken := fbrecover.Func(nil, func(fbrecover.Context, int) (time.Duration, int) { panic("broken policy") })
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()
	b, err := m.Register("search", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  fallback{Recover: broken, period: 7 * time.Second},
	})
	require.NoError(t, err)

	_ = b.Do(context.Background(), func(context.Context) error { return errors.New("down") })
	m.Sync()
	assert.Equal(t, breaker.Open, b.State(), "no restart: the breaker stays open")
	assert.Equal(t, 7*time.Second, chosen(b))
}

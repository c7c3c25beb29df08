package manager_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
)

// A failing permit released twice counts once: a Consecutive{2} breaker
// does not trip on one failing call released twice, and the stats count
// one call. The second release is logged, once, naming the breaker. (A
// success released twice still counts twice: see release.go.)
func TestPermitReleasedTwiceCountsOnce(t *testing.T) {
	var logs logBuffer
	m := manager.Start(manager.Options{Logger: logs.logger()})
	t.Cleanup(m.Stop)
	b := register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 2}})

	p, err := b.Acquire(context.Background())
	require.NoError(t, err)
	p.Release(errBoom)
	p.Release(errBoom)
	m.Sync()
	assert.Equal(t, breaker.Closed, b.State(), "one failing call, released twice, does not trip Consecutive{2}")
	assert.Equal(t, uint64(1), b.Stats().Failures, "the call counts once")

	// A copy is the same permit.
	p, err = b.Acquire(context.Background())
	require.NoError(t, err)
	q := p
	p.ReleaseOutcome(classify.Ignore)
	q.ReleaseOutcome(classify.Ignore)
	assert.Equal(t, uint64(1), b.Stats().Ignored, "a copy released after the permit counts nothing")

	// Two permits are two calls.
	p1, err := b.Acquire(context.Background())
	require.NoError(t, err)
	p2, err := b.Acquire(context.Background())
	require.NoError(t, err)
	p1.Release(errBoom)
	p2.Release(errBoom)
	m.Sync()
	assert.Equal(t, breaker.Open, b.State(), "two failing calls trip Consecutive{2}")

	m.Sync()
	warned := logs.find(t, "fusebox: a permit was released twice; the second release counts nothing")
	require.Len(t, warned, 1, "logged once")
	assert.Equal(t, "svc", warned[0]["breaker"])
}

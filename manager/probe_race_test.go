package manager_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
)

// The manager publishes a probe's deadline (the same generation, a new
// snapshot) while the probe may already be releasing. The release must still
// count: a probe's success closes the breaker, its failure re-opens it.
func TestProbeReleaseRacesWithProbeDeadline(t *testing.T) {
	m, b, adv := halfOpen(t, "racy")
	for round := range 500 {
		p := probe(t, b)
		if round%2 == 0 {
			p.Release(nil)
			require.Equal(t, breaker.Closed, b.State(), "round %d: a probe's success must close the breaker", round)
			fail(t, b, 1)
		} else {
			p.Release(errBoom)
			require.Equal(t, breaker.Open, b.State(), "round %d: a probe's failure must re-open the breaker", round)
		}
		require.Zero(t, b.Stats().Stale, "round %d: no release is stale", round)
		m.Sync()
		adv(time.Second)
	}
}

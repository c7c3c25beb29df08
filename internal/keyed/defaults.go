package keyed

import (
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// DefaultMaxRetry is the cap on a server's retry hint (HTTP's Retry-After,
// gRPC's retry pushback) when an integration's options set none: a hint
// longer than that is a server's mistake, not a period to stay open.
const DefaultMaxRetry = 10 * time.Minute

// DefaultConfig is the configuration of a breaker an integration registers
// when its options give none: the fifth failure in a row trips it, it stays
// open 5 seconds after a trip, twice as long after each failed probe up to
// 2 minutes, each open period shortened by up to 20% at random so that many
// clients do not probe at the same instant, and a probe may run 5 seconds.
func DefaultConfig() manager.Config {
	return manager.Config{
		Strategy: breaker.Consecutive{Failures: 5},
		Recover: recover.Exponential{
			Initial: 5 * time.Second,
			Max:     2 * time.Minute,
			Jitter:  0.2,
		},
	}
}

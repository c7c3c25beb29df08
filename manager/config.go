package manager

import (
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

// Config is the configuration of one breaker. Its zero value is valid.
type Config struct {
	// Strategy decides when the closed breaker trips. Nil means
	// breaker.Consecutive{Failures: 5}.
	Strategy breaker.Strategy
	// Recover decides how long the breaker stays open and how long a probe
	// may run. Nil means recover.BasicTimeout{Open: 30 * time.Second}.
	Recover recover.Recover
	// Classify turns a call's error into an outcome. Nil means
	// classify.Default.
	Classify classify.Classifier
	// Store, when set, shares the breaker with every manager, in this
	// process or another, that registers a breaker of the same name on the
	// same store: one breaker for the fleet (see package store). Nil keeps
	// the state in this process only. The Strategy must be one a store can
	// evaluate (breaker.Consecutive, breaker.TimeWindow, or a
	// store.Shareable); Register fails otherwise. The store must be
	// comparable (a pointer, as store.NewMemory and redisstore.New return).
	Store store.Store
	// Fallback says what the breaker does while Store cannot be reached:
	// the zero value, store.FallbackLocal, runs it on its own local state
	// machine until the store answers again. Ignored without a Store.
	Fallback store.Fallback
}

// The defaults of a zero Config.
var (
	defaultStrategy breaker.Strategy = breaker.Consecutive{Failures: 5}
	defaultRecover  recover.Recover  = recover.BasicTimeout{Open: recover.DefaultOpen}
)

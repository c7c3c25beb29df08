// Package breaker holds the circuit breaker's vocabulary: its states and
// transitions, the strategies that decide when a closed breaker trips, the
// error a declined call gets, and Snapshot, a breaker's state at one moment.
//
// The state machine that ties them together is pure (it starts no goroutine
// and never reads a clock) and lives inside the module; package manager
// drives it and is the way to use breakers.
package breaker

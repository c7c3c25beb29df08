// Package breaker holds the circuit breaker itself: its states and
// transitions, the strategies that decide when a closed breaker trips, the
// error a declined call gets, and Machine, the state machine that ties them
// together.
//
// Machine is pure: it starts no goroutine and never reads a clock. Every
// method that needs the time takes it as an argument, so the whole life of a
// breaker can be stepped through in a test with fixed instants. It is also
// safe for concurrent use: its state is one immutable Snapshot published
// through an atomic pointer, and every transition is a compare-and-swap from
// the snapshot it was decided on. Callers admitted in the closed state touch
// nothing but that pointer and their strategy's atomic counters.
//
// Machine does not run timers. A transition that needs one (a trip, a failed
// probe, a probe that starts) is reported as a Step; whoever drives the
// machine (package manager) asks the breaker's recovery policy how long the
// timer runs, and later calls Expire. Package manager is the usual way to use
// breakers; use Machine directly only to build a different driver.
package breaker

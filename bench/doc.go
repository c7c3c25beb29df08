// Package bench measures fusebox side by side with two other circuit-breaker
// libraries for Go, sony/gobreaker (v2) and failsafe-go, each configured for
// the same policy, and measures how fusebox's manager scales to many
// breakers.
//
// The package holds only benchmarks, the tests that check the libraries
// are configured alike, and the examples of the migration guides
// (docs/from-gobreaker.md, docs/from-failsafe-go.md: one program written
// for each library and for fusebox, run as tests); it lives in a module of
// its own so that the libraries compared never enter fusebox's go.mod.
//
// Side-by-side benchmarks are named Case/variant/mode/lib=name, so that
// benchstat can put the libraries in columns:
//
//	go test -run '^$' -bench . -benchmem -count 6 . > new.txt
//	go run golang.org/x/perf/cmd/benchstat -col /lib new.txt
//
// The cases:
//
//   - Closed: a successful call through a closed breaker, with a
//     consecutive-failure policy (5 failures in a row trip it) and with a
//     failure-rate policy over the last 100 calls.
//   - Declined: a call declined by an open breaker.
//   - Do: a wrapper (fusebox's Breaker.Do, gobreaker's Execute, failsafe's
//     executor) around a function that returns nil.
//   - Random: a successful call through one breaker picked at random among
//     10,000, to show how each library uses the caches.
//
// Each runs on one goroutine (serial) and with b.RunParallel (parallel).
//
// BenchmarkBaseline measures what the machine's atomic add, atomic load,
// uncontended mutex and time.Now cost, the operations the libraries are
// built from.
//
// BenchmarkScale measures fusebox alone: the manager's time per transition
// while 1,000, 10,000 or 100,000 breakers trip, wait out their open period,
// probe and close, and the heap each registered breaker takes.
//
// The command in cmd/report runs the whole suite several times, takes the
// medians and writes docs/benchmarks.md and docs/benchmarks.svg in the
// fusebox repository; run.sh runs it.
package bench

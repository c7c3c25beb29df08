// Package fleetsim is a deterministic simulator of a fleet of processes
// sharing breakers through one store: the real manager code (each process
// a manager.Manager with a name and a clock of its own) over a
// store.Memory behind a store of faults, driven by a seeded schedule.
//
// Its pieces:
//   - Plan (plan.go) is what a seed decides before the run: the processes,
//     their clocks' skews, and the schedule of events (the service failing
//     and healing, partitions, pauses, crashes and restarts, duplicate
//     names, data loss, operators, spans of faulty store calls and
//     deliveries), each at an instant of its own;
//   - draws (draws.go) decide every delay and every per-call fault as a
//     function of the seed and of what is drawn for (a process, an
//     operation and its count), not of the order goroutines run in;
//   - spans.go says what the plan holds at an instant: the spans active
//     for a process, and the fault a call or a delivery draws;
//   - the faulty store (store.go) delays every call and every change,
//     loses and duplicates them as the plan says, and records what the
//     store did for the invariants;
//   - the callers (service.go) call each breaker through Acquire and
//     Release, and the service answers them as the plan's health says,
//     recording every trial call;
//   - each process's clock (clock.go) is the true one with a skew;
//   - the fleet (fleet.go) runs the processes, their callers and the
//     schedule;
//   - the invariants (invariants.go) are the promises of the fleet
//     protocol, each a small function, checked after every store
//     operation and every trial call, and at checkpoints;
//   - Shrink (shrink.go) removes events from a failing schedule while the
//     same invariant still fails.
//
// Run must be called inside a testing/synctest bubble, where time is
// virtual: the managers' clocks (clock.New), the store's and the
// simulator's timers all run on it, so ten seconds of a fleet take a
// fraction of a second, and the same seed gives the same run, but for
// the pause the manager draws, from a source no seed sets, before it
// retries a failed read of its queue.
package fleetsim

package fleet

// A dry run stays dry: a process in a dry run (State.DryRun) never makes a
// process that is not in one decline a call. So it writes nothing to the
// store that counts towards, or makes, an opening or a probe of the
// fleet's:
//
//   - it reports no outcome (no failure, and no success, which could end
//     a run another process reports into);
//   - its own outcomes trip its own breaker alone (as a process short of
//     its quorum does, cause alone): its own period, its own probe,
//     nothing published, no opening sent to the store;
//   - it takes no probe lease: a probe of its, in a period of its own or
//     the fleet's, is its alone, and its verdict is its alone;
//   - coming back from a store outage, it tells the fleet of no opening
//     made meanwhile.
//
// It still reads the store and follows the fleet, so that its Stats and
// events show what the fleet would have it decline (WouldDecline). Manual
// controls (ForceOpen, HalfOpen, Reset) are an operator's, not the dry
// run's: they act for the fleet as in any process.

// DryRunSet says the breaker's dry run was turned on or off
// (manager.Breaker.Reconfigure of Config.DryRun).
type DryRunSet struct{ On bool }

func (DryRunSet) isMsg() {}

// dryOutcome is what a process in a dry run does with an outcome in the
// closed state: it tells the store nothing, and trips alone when its own
// count trips.
func (s *State) dryOutcome(m Outcome, a *Actions) {
	if m.LocalTrip && a.Change == nil {
		a.Change = Trip{Gen: m.Gen, Outcome: m.Outcome, Alone: true}
	}
}

package fleet

// echoed reports whether the lease a status h shows is this process's
// own, heard back after its probe failed here: the store holds that lease
// for the process from its grant until the failed probe's verdict, which
// the loop sends once Recover decided the next open period (the probe's
// phases failing, then reopening), reaches it. No other process can hold a lease of that
// epoch meanwhile, so a lease of the epoch heard of then (its own Leased
// change, which pub/sub may deliver after the probe failed) is that one,
// and moves nothing: the process records no open -> probing -> open pair
// for its own lease and verdict. Once the verdict is decided, the store's
// answer is followed whatever it says (another process's lease, if the
// store's lease ran out first); the verdict's own Opened change is of the
// next epoch, which the breaker, open already, follows without a
// transition.
func (s *State) echoed(h Heard) bool {
	p := s.Probe
	return (p.Kind == ProbeFailing || p.Kind == ProbeReopening) && h.Status.Epoch == p.Lease.Epoch && h.Status.Opened() && h.Status.Probe > 0
}

package fleet

import (
	"github.com/fusebox-go/fusebox/internal/sharepolicy"
	"github.com/fusebox-go/fusebox/store"
)

// QuorumShort says the fleet's failures reached the threshold and the
// quorum refused the opening: Processes reported them, fewer than Quorum
// (manager.Config.Quorum). It is the first moment a Quorum larger than
// the processes that fail can be known: one bad replica is what a quorum
// is for, but a fleet of fewer than Quorum processes can never open. The
// loop warns of it, once per breaker until its policy changes.
type QuorumShort struct {
	Processes int64
	Quorum    int
}

func (QuorumShort) isEffect() {}

// quorumShort asks the loop for a QuorumShort when verdict v reaches the
// strategy's threshold, the quorum refuses the opening, and fewer than
// Quorum processes reported the failures: once.
func (s *State) quorumShort(v store.Verdict, a *Actions) {
	p := s.Policy
	if s.QuorumSaid || v.Opened() || v.Processes >= int64(p.Quorum) || !sharepolicy.Reached(p, v) || p.Trips(v) {
		return
	}
	s.QuorumSaid = true
	a.loop(QuorumShort{Processes: v.Processes, Quorum: p.Quorum})
}

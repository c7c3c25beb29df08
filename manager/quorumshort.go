package manager

import (
	"fmt"

	"github.com/fusebox-go/fusebox/internal/fleet"
)

// quorumShortError is the Err of an EventQuorumShort: how many processes
// reported the failures that reached the threshold, and the quorum.
type quorumShortError struct {
	name      string
	processes int64
	quorum    int
}

func (e *quorumShortError) Error() string {
	return fmt.Sprintf("fusebox: breaker %q: the fleet's failures reach the threshold, but from %d processes, fewer than Config.Quorum (%d): each opens alone, and the fleet opens only once %d processes report such failures; a fleet of fewer than %d processes sharing the breaker can never open (lower Quorum)",
		e.name, e.processes, e.quorum, e.quorum, e.quorum)
}

// quorumShort warns that breaker b's quorum refused an opening the
// threshold reached (fleet.QuorumShort): a log line and an
// EventQuorumShort, which name the breaker and the field.
func (m *Manager) quorumShort(b *Breaker, e fleet.QuorumShort) {
	err := &quorumShortError{name: b.Name(), processes: e.Processes, quorum: e.Quorum}
	m.logWarn("fusebox: the fleet's failures reach the threshold from fewer processes than Config.Quorum",
		"breaker", b.Name(), "field", "Quorum", "quorum", e.Quorum, "processes", e.Processes,
		"hint", "each process opens alone; a fleet of fewer processes than the Quorum can never open")
	if len(m.subs) > 0 && !b.removed {
		m.publish(b, Event{Kind: EventQuorumShort, Name: b.Name(), At: m.clk.Now(), Gen: b.lastGen(), Err: err})
	}
}

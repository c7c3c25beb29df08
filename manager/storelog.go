package manager

import (
	"fmt"
	"strings"
)

// logNames is how many breakers a store's log line names before it says
// how many more.
const logNames = 8

// breakerNames returns the breakers of hub h, for a log line about their store:
// "a, b, c", or the first logNames of them and "and N more".
func (h *hub) breakerNames() string {
	var b strings.Builder
	for i, sh := range h.list {
		if i == logNames {
			fmt.Fprintf(&b, " and %d more", len(h.list)-logNames)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(sh.b.Name())
	}
	return b.String()
}

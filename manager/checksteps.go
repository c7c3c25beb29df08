package manager

import (
	"fmt"
	"os"

	"github.com/fusebox-go/fusebox/internal/fleet"
)

// checkSteps makes every step of a shared breaker check the invariants
// between the phases of its state (fleet.State.Check) and panic, naming
// the breaker, the message and the broken invariant, when one does not
// hold. The package's tests set it; FUSEBOX_CHECK_STEPS=1 sets it for any
// program, as CI does for every test of every module.
var checkSteps = os.Getenv("FUSEBOX_CHECK_STEPS") != ""

// check checks sh's state after the step of msg; sh.mu is held.
func (sh *shared) check(msg fleet.Msg) {
	v := sh.view(sh.b.mach.Snapshot())
	if err := sh.state.Check(v); err != nil {
		panic(fmt.Sprintf("fusebox: breaker %q: after %T%+v the shared state breaks an invariant: %v\nstate: %+v\nview: %+v", sh.b.Name(), msg, msg, err, sh.state, v))
	}
}

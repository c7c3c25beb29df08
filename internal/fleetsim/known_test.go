//go:build go1.25

package fleetsim_test

import "github.com/fusebox-go/fusebox/internal/fleetsim"

// knownKinds are the kinds of events that expose a defect of the current
// code (knownDefects): the CI run leaves them out.
var knownKinds = []fleetsim.Kind{fleetsim.SlowReplies, fleetsim.CrashDefaultName, fleetsim.BadReplica, fleetsim.RampReset}

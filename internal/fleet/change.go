package fleet

import "github.com/fusebox-go/fusebox/store"

// StatusOf returns change c as the status it left the breaker in, for a
// mirror to follow as it follows a status read.
func StatusOf(c store.Change) store.Status {
	return store.Status{Epoch: c.Epoch, Open: c.Open, Probe: c.Probe, Forced: c.Kind == store.Forced, SlowStart: c.SlowStart, Reason: c.Reason}
}

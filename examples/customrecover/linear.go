package main

import (
	"fmt"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/recover"
)

// Linear is a recovery policy written for this example. After a trip the
// breaker stays open for Base; every probe that fails adds Step to the open
// period, up to Max. A probe may run for half the open period before it: the
// longer a service has been down, the slower its first answers tend to be
// (cold caches, connection pools filling up), so a later probe gets more
// time. The first trip after a recovery starts again from Base.
type Linear struct {
	Base time.Duration // the first open period; must be positive
	Step time.Duration // added per failed probe; must not be negative
	Max  time.Duration // the longest open period; must be at least Base
}

// linearState is what Linear remembers between two Timeout calls of one
// breaker. The manager keeps it and hands it back; Linear itself holds none.
type linearState struct {
	failedProbes int
	open         time.Duration // the last open period chosen
}

// Init implements recover.Recover. It validates the options, naming the field
// at fault, and returns the initial state. The manager calls it when the
// breaker is registered, and again if it restarts after a panic.
func (l Linear) Init() (any, error) {
	switch {
	case l.Base <= 0:
		return nil, &breaker.ConfigError{Field: "Linear.Base", Problem: fmt.Sprintf("must be positive, got %v", l.Base)}
	case l.Step < 0:
		return nil, &breaker.ConfigError{Field: "Linear.Step", Problem: fmt.Sprintf("must not be negative, got %v", l.Step)}
	case l.Max < l.Base:
		return nil, &breaker.ConfigError{Field: "Linear.Max", Problem: fmt.Sprintf("must be at least Base (%v), got %v", l.Base, l.Max)}
	}
	return linearState{}, nil
}

// Timeout implements recover.Recover. The manager calls it at the three
// transitions that start a timer: {closed, open}, {probing, open} and
// {half_open, probing}.
func (l Linear) Timeout(c recover.Context, state any) (time.Duration, any) {
	st := state.(linearState)
	switch c.Transition {
	case breaker.Transition{From: breaker.Closed, To: breaker.Open}:
		// A trip: the first since the breaker was registered or last closed
		// by a successful probe.
		st = linearState{open: l.Base}
	case breaker.Transition{From: breaker.Probing, To: breaker.Open}:
		st.failedProbes++
		st.open = min(l.Base+time.Duration(st.failedProbes)*l.Step, l.Max)
	default: // {half_open, probing}: a probe starts
		return st.open / 2, st
	}
	return st.open, st
}

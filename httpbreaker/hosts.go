package httpbreaker

import (
	"fmt"
	"net/http"

	"github.com/fusebox-go/fusebox/internal/keyed"
	"github.com/fusebox-go/fusebox/manager"
)

// Defaults of the bounds on a Transport's breakers.
const (
	// DefaultMaxBreakers is how many breakers a Transport keeps when
	// Options.MaxBreakers is zero.
	DefaultMaxBreakers = keyed.DefaultMax
	// DefaultIdleTimeout is how long a breaker no request went through is
	// kept when Options.IdleTimeout is zero.
	DefaultIdleTimeout = keyed.DefaultIdle
)

// acquire asks the breaker of req's key for a permit, registering the
// breaker first if the key is new (see package keyed for the bounds).
func (t *Transport) acquire(req *http.Request) (manager.Permit, error) {
	key := t.key(req)
	if key == "" {
		return manager.Permit{}, fmt.Errorf("fusebox: httpbreaker: the key function returned an empty key for %s", describe(req))
	}
	_, p, err := t.breakers.Acquire(req.Context(), key)
	return p, err
}

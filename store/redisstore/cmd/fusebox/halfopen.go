package main

import (
	"context"
	"fmt"

	"github.com/fusebox-go/fusebox/store"
)

// halfOpen ends the open period of the breaker name for every process, as
// a manager's Breaker.HalfOpen does: the epoch it reads is the one it
// ends, so that an opening made meanwhile is not cut short. It prints
// what the store holds of it after, and refuses, saying why, a breaker
// that is not open: one the store holds nothing of, closed, half-open
// already, probing, or forced open (only reset lifts a force-open).
func (c *cli) halfOpen(ctx context.Context, name string) error {
	b, known, err := c.st.Inspect(ctx, name)
	if err != nil {
		return err
	}
	if !known {
		return errNoBreaker{name}
	}
	st, applied, err := c.st.HalfOpen(ctx, name, b.Epoch)
	if err != nil {
		return err
	}
	if !applied {
		return fmt.Errorf("half-open %q refused: %s", name, notOpen(name, st, b.Epoch))
	}
	after, ok, err := c.st.Inspect(ctx, name)
	if err != nil {
		return fmt.Errorf("half-open %q done (epoch %d), but reading it back failed: %w", name, st.Epoch, err)
	}
	if !ok {
		return fmt.Errorf("half-open %q done (epoch %d), but the store holds nothing of it after", name, st.Epoch)
	}
	c.print(after)
	return nil
}

// notOpen says why the store refused to end the open period of the
// breaker name in epoch, from the status st it answered with.
func notOpen(name string, st store.Status, epoch uint64) string {
	switch {
	case !st.Opened():
		return "it is closed, not open: there is no open period to end"
	case st.Forced:
		return fmt.Sprintf("it is forced open: only reset lifts a force-open (fusebox reset %q closes it for every process at once)", name)
	case st.Epoch != epoch:
		return fmt.Sprintf("it changed meanwhile (epoch %d, read as %d): look again (fusebox show %q)", st.Epoch, epoch, name)
	case st.Probe > 0:
		return fmt.Sprintf("it is probing: a process holds the probe lease (%v left), and its verdict decides", st.Probe)
	}
	return "it is half_open already: the next call of any process is the probe"
}

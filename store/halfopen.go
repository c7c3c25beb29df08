package store

import (
	"context"
)

// HalfOpener is implemented by a store that can end a breaker's open
// period by hand, for every process that shares it
// (manager.Breaker.HalfOpen, the command line's half-open): Memory and
// redisstore's Store do. A manager asked to half-open a shared breaker
// whose store lacks it refuses with an error naming the store.
//
// HalfOpen ends the open period of the opened epoch epoch if the breaker
// is still in it, open (its period not over), not forced and with no
// probe lease held: the epoch moves to the next opened one, as a failed
// probe's reopening moves it, with its period over and the opening's
// Reason kept, and the store publishes an Opened change of that epoch
// with a zero Open. Every process follows that change into half_open,
// and the probe lease (AcquireProbe in the new epoch) lets exactly one of
// them make the trial. In any other case it changes nothing. It returns
// the status after the call and whether it ended the period; the status
// of a refusal says why (closed, another epoch, half-open already, a
// lease held, forced).
type HalfOpener interface {
	HalfOpen(ctx context.Context, name string, epoch uint64) (Status, bool, error)
}

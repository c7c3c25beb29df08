//go:build race

package stripe

import "sync/atomic"

// add increments a counter atomically: the race detector does not know that
// pinning makes the line the caller's alone.
func add(p *uint64) { atomic.AddUint64(p, 1) }

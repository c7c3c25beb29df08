package stripe

import _ "unsafe" // for go:linkname

// Rand32 returns a pseudo-random uint32 from the runtime's per-thread
// generator (runtime.cheaprand, which the runtime keeps linkable): no
// lock, no shared write, a few instructions. It is not for secrets.
//
//go:linkname Rand32 runtime.cheaprand
//go:nosplit
func Rand32() uint32

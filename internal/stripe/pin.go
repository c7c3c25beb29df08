package stripe

import _ "unsafe" // for go:linkname

// procPin returns the index of the P the goroutine runs on and keeps the
// goroutine there, unpreemptible, until procUnpin. sync.Pool relies on the
// same pair for its per-P caches; the runtime keeps them reachable by
// linkname for packages outside the standard library (go.dev/issue/67401).
//
//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

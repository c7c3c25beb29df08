package stripe

import _ "unsafe" // for go:linkname

// procPin returns the index of the P the goroutine runs on and keeps it there
// until procUnpin. sync.Pool uses the same pair; the runtime keeps it
// reachable by linkname for packages outside the standard library
// (go.dev/issue/67401). It is only a hint here: a goroutine may move to
// another P right after procUnpin, which costs a shared cache line, never a
// lost count, since every increment is atomic.
//
//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

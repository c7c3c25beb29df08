//go:build !race

package stripe

// add increments a counter of the line of the P the caller is pinned to.
// Only that P writes the line, and nothing else runs on it while the caller
// is pinned, so a plain add cannot lose an increment.
func add(p *uint64) { *p++ }

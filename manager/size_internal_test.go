package manager

import (
	"testing"
	"unsafe"
)

// A Breaker fits the allocator's 256-byte size class: one field more, or
// padding between them, moves every breaker to the 288-byte class.
func TestBreakerFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(Breaker{}); n > 256 {
		t.Fatalf("a Breaker is %d bytes, over the 256-byte size class", n)
	}
}

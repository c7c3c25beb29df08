// This file lets pin.go declare functions without bodies, which the linker
// binds to the runtime's procPin and procUnpin.

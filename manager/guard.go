package manager

// This file must not import package recover: its name would hide the
// builtin recover() used here.

import "runtime/debug"

// caught is a panic recovered from a user callback.
type caught struct {
	value any
	stack []byte
}

// guard runs f and returns the panic it raised, if any.
func guard(f func()) (p *caught) {
	defer func() {
		if v := recover(); v != nil {
			p = &caught{value: v, stack: debug.Stack()}
		}
	}()
	f()
	return nil
}

// sameValue reports whether a and b are the same comparable value: false
// for values of different types, and for values that cannot be compared
// (a struct holding a func, say), which are taken as changed.
func sameValue(a, b any) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

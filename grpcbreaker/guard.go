package grpcbreaker

// This file must not import package recover of fusebox: its name would hide
// the builtin recover() used here.

// guard runs f and reports whether it returned without panicking.
func guard(f func()) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	f()
	return true
}

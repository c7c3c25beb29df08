package manager

import "errors"

// ErrStopped is returned by Acquire, Do, Call and Register once the manager
// has stopped, because Stop was called or because its callbacks panicked too
// often.
var ErrStopped = errors.New("fusebox: manager stopped")

// ErrDuplicate is matched, with errors.Is, by the error Register returns for
// a name that is already registered.
var ErrDuplicate = errors.New("fusebox: a breaker with this name is already registered")

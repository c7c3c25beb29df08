package manager

import "errors"

// ErrStopped is returned by Acquire, Do, Call and Register once the manager
// has stopped, because Stop was called or because its callbacks panicked too
// often.
var ErrStopped = errors.New("fusebox: manager stopped")

// ErrRemoved is returned by every call through the handle of a breaker that
// Manager.Remove removed: Acquire, Do, Call, ForceOpen, Reset and
// Reconfigure. A breaker registered again under the same name is a new
// breaker with a new handle; the old handle stays removed.
var ErrRemoved = errors.New("fusebox: breaker removed")

// ErrDuplicate is matched, with errors.Is, by the error Register returns for
// a name that is already registered.
var ErrDuplicate = errors.New("fusebox: a breaker with this name is already registered")

// ErrNilContext is matched, with errors.Is, by the error Acquire, Do and Call
// return for a nil context. Such a call is not made and not counted.
var ErrNilContext = errors.New("fusebox: nil context")

// ErrNilFunc is matched, with errors.Is, by the error Do and Call return for
// a nil function. Such a call is not made and not counted: it is the
// caller's mistake, not the service's failure.
var ErrNilFunc = errors.New("fusebox: nil function")

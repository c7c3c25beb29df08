package recover

import "time"

// Func returns a Recover built from two functions over a state of type S, so
// that a policy can be written without type assertions. init returns the
// first state (a nil init starts from S's zero value); timeout returns the
// duration for c.Transition and the next state. A nil timeout makes Init
// fail with a *breaker.ConfigError whose Field is "recover.Func.timeout".
//
// For example, a policy whose open period doubles every time the breaker
// opens, starting at one second, and whose probes may always run one
// second: the state is the next open period, and a probe's timeout leaves
// it as it is.
//
//	recover.Func(
//		func() (time.Duration, error) { return time.Second, nil },
//		func(c recover.Context, open time.Duration) (time.Duration, time.Duration) {
//			if c.Transition.To != breaker.Open {
//				return time.Second, open // a probe may run 1s; the open period stays
//			}
//			return open, 2 * open
//		},
//	)
func Func[S any](init func() (S, error), timeout func(Context, S) (time.Duration, S)) Recover {
	return funcRecover[S]{init: init, timeout: timeout}
}

type funcRecover[S any] struct {
	init    func() (S, error)
	timeout func(Context, S) (time.Duration, S)
}

func (f funcRecover[S]) Init() (any, error) {
	if f.timeout == nil {
		return nil, invalid("recover.Func.timeout", "must not be nil")
	}
	var s S
	if f.init != nil {
		var err error
		if s, err = f.init(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (f funcRecover[S]) Timeout(c Context, state any) (time.Duration, any) {
	s, _ := state.(S)
	d, next := f.timeout(c, s)
	return d, next
}

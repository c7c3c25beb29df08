// Package grpcbreaker puts the targets of gRPC clients behind circuit
// breakers. An Interceptor is a pair of client interceptors, unary and
// stream, that send each call through the breaker of its target, so that a
// server that keeps failing is left alone for a while instead of being
// sent more calls it cannot serve.
//
// # Using it
//
//	m := manager.Start(manager.Options{})
//	defer m.Stop()
//	i, err := grpcbreaker.New(m, grpcbreaker.Options{})
//	if err != nil { ... }
//	conn, err := grpc.NewClient(target, append(i.DialOptions(), creds)...)
//	...
//	_, err = client.Check(ctx, req)
//	if errors.Is(err, breaker.ErrOpen) { ... } // declined: nothing was sent
//
// A declined call returns an error whose gRPC status is Unavailable, as a
// server that cannot be reached would give, so code that handles
// Unavailable already handles it; errors.Is(err, breaker.ErrOpen) tells it
// apart, and errors.As finds the *breaker.OpenError, which says until when
// the breaker stays open.
//
// # Breakers per target or per method
//
// Options.Key names the breaker of a call; by default it is TargetKey, the
// target the client connection was made for, so every server (or service
// behind one name) has a breaker of its own. MethodKey gives a breaker per
// method of each target, for services whose methods fail independently.
// The first call with a new key registers a breaker under that name with
// the manager, configured by Options.Config (DefaultConfig by default);
// later calls find it in a cache that takes no lock and makes no round trip
// to the manager. A breaker registered under the same name beforehand, by
// hand or by another Interceptor, is used as it is.
//
// The Interceptor bounds its breakers as httpbreaker's Transport does: a
// breaker no call went through for Options.IdleTimeout is removed from the
// manager (Manager.Remove), and before a new key would exceed
// Options.MaxBreakers the least recently used are, closed ones first, so
// that an open breaker of a server still called goes last. A removed key
// gets a fresh breaker on its next call. Only breakers the Interceptor
// registered are removed; one found registered is only forgotten.
//
// # What counts as a failure
//
// Classify is the default classification, by status code: Unavailable,
// DeadlineExceeded, ResourceExhausted, Internal, Unknown, DataLoss and
// transport errors are failures; Canceled is ignored; the codes that say
// the caller was wrong (InvalidArgument, NotFound, AlreadyExists,
// PermissionDenied, Unauthenticated, FailedPrecondition, OutOfRange, and
// Aborted and Unimplemented) are successes, since the server answered.
// Options.Classify replaces it, and a breaker's Config.Classify replaces it
// for that breaker.
//
// A unary call counts when it returns. A stream counts once, when it ends:
// when its caller reads it to the end or to an error, or when its context
// is done first.
//
// # Retry hints
//
// A server may say how long to leave it alone: a RetryInfo detail in its
// status (google.rpc.RetryInfo) or a grpc-retry-pushback-ms trailer. The
// Interceptor releases such a call with an error that carries the wait (a
// recover.Hint, read by RetryDelay), and registers its breakers with their
// recovery policy wrapped by recover.WithHints: if the call opens the
// breaker, the open period lasts at least as long as the server asked, up
// to Options.MaxRetryDelay. The hint travels with the call's error into
// recover.Context.Err, so a breaker registered by hand can honour it with
// recover.WithHints or a policy of its own.
//
// # Slow calls
//
// A server that hangs makes each call wait out its caller's deadline, which
// counts as a failure (DeadlineExceeded). To trip before those deadlines
// stack up, give the breakers a manager.Config.SlowCall shorter than the
// callers' deadlines.
package grpcbreaker

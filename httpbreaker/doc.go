// Package httpbreaker puts the upstreams of an HTTP client behind circuit
// breakers. A Transport is an http.RoundTripper that wraps another one and
// sends each request through the breaker of its upstream, so that an
// upstream that keeps failing is left alone for a while instead of being
// sent more requests it cannot serve.
//
// # Using it
//
//	m := manager.Start(manager.Options{})
//	defer m.Stop()
//	t, err := httpbreaker.New(m, httpbreaker.Options{})
//	if err != nil { ... }
//	client := &http.Client{Transport: t}
//	resp, err := client.Get("https://api.example.com/v1/items")
//	if errors.Is(err, breaker.ErrOpen) { ... } // declined without a request being sent
//
// # Breakers per upstream
//
// Options.Key names the breaker of a request; by default it is HostKey, the
// host and port of the request's URL, so every upstream host has a breaker
// of its own and one failing host does not stop the requests to the others.
// A Key that also looks at the path gives a breaker per route. The first
// request with a new key registers a breaker under that name with the
// manager, configured by Options.Config (DefaultConfig by default); later
// requests find it in a cache that takes no lock and makes no round trip to
// the manager. A breaker registered under the same name beforehand, by hand
// or by another Transport, is used as it is.
//
// # How many breakers
//
// A Transport keeps its breakers bounded however many keys its requests
// name (hosts chosen by users, a new httptest server per test): a breaker
// no request went through for Options.IdleTimeout (DefaultIdleTimeout, 10
// minutes) is removed from the manager, and before a new key would make
// more than Options.MaxBreakers (DefaultMaxBreakers, 1,000), the least
// recently used are removed, closed ones first. An open breaker of an
// upstream that still gets requests is the last to go: removing it would
// send the upstream it protects every request again. Removal goes through
// Manager.Remove, so metrics drop the breaker's series and the dashboard
// its card; a request to the key later registers a fresh breaker. The
// Transport runs no goroutine for this: requests do the work as they come.
// Breakers registered by hand are used but never removed. A Key that also
// looks at the path should still use route patterns rather than raw paths,
// or its breakers churn and count nothing.
//
// # What counts as a failure
//
// Classify is the default classification: a 5xx status, 408 Request
// Timeout or 429 Too Many Requests is a failure, any other status a success, a request cancelled by
// its caller (context.Canceled) is ignored, and any other error (a refused
// connection, a reset, a deadline exceeded) is a failure. Options.Classify
// replaces it; a Config with a Classify of its own is refused, since the
// Transport would not use it.
//
// # Retry-After
//
// When a 429 or 503 response carries a Retry-After header (in seconds or as
// an HTTP date), the Transport releases the request with a *StatusError
// that carries the wait, and registers its breakers with their recovery
// policy wrapped by recover.WithHints. If that response opens the breaker
// (it trips it, or it is a failed probe), the breaker stays open at least
// as long as the upstream asked, even when its policy's open period is
// shorter, up to Options.MaxRetryAfter. The hint reaches the policy in
// recover.Context.Err, so a breaker registered by hand can honour it too.
//
// # Response bodies
//
// The Transport never reads, drains or closes a response body. The outcome
// of a request is decided by its status line, when the wrapped RoundTripper
// returns, and the breaker's permit is released then; the response goes to
// the caller untouched, and closing its body stays the caller's job. A
// declined request closes the request's body, as the http.RoundTripper
// contract requires, and returns without touching the network.
package httpbreaker

package httpbreaker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/keyed"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// Options configure a Transport. The zero value is valid.
type Options struct {
	// Base is the RoundTripper that sends the requests let through. Nil
	// means http.DefaultTransport.
	Base http.RoundTripper
	// Key names the breaker a request goes through. It must return a
	// non-empty name. Nil means HostKey: one breaker per upstream host and
	// port.
	Key func(req *http.Request) string
	// Config returns the configuration of the breaker registered for key,
	// the first time a request has that key. Its Classify field must be nil:
	// the Transport classifies responses with Options.Classify, and a
	// Config with a Classify fails the registration (the request gets the
	// error) rather than being silently ignored. Nil means DefaultConfig.
	Config func(key string) manager.Config
	// Classify decides the outcome of each request let through. When the
	// request's context was cancelled, the error it is given satisfies
	// errors.Is(err, context.Canceled) even if the wrapped RoundTripper
	// reported the context's cancellation cause instead. Nil means
	// Classify.
	Classify Classifier
	// IgnoreRetryAfter turns off Retry-After handling: the breakers'
	// recovery policies are used as they are.
	IgnoreRetryAfter bool
	// MaxRetryAfter caps how long a Retry-After header may keep a breaker
	// open. Zero means DefaultMaxRetryAfter; it must not be negative.
	MaxRetryAfter time.Duration
	// MaxBreakers caps how many breakers the Transport keeps, however many
	// keys its requests name. Before a new key would exceed it, the
	// Transport removes (Manager.Remove) the breakers used least recently,
	// closed ones before open, half-open or probing ones. Zero means
	// DefaultMaxBreakers; a negative value means no cap.
	MaxBreakers int
	// IdleTimeout is how long a breaker no request went through is kept:
	// the Transport then removes it (Manager.Remove), whatever its state.
	// Zero means DefaultIdleTimeout; a negative value keeps idle breakers.
	IdleTimeout time.Duration
}

// DefaultMaxRetryAfter is the cap on a Retry-After hint when
// Options.MaxRetryAfter is zero.
const DefaultMaxRetryAfter = keyed.DefaultMaxRetry

// DefaultConfig is the configuration of a breaker registered by a Transport
// whose Options.Config is nil: the fifth failure in a row trips it, it stays
// open 5 seconds after a trip, twice as long after each failed probe up to 2
// minutes, each open period shortened by up to 20% at random so that many
// clients do not probe at the same instant, and a probe may run 5 seconds.
func DefaultConfig(key string) manager.Config { return keyed.DefaultConfig() }

// Transport is an http.RoundTripper that sends each request through the
// circuit breaker of its upstream, registered with a manager.Manager on
// first use. Create one with New; it is safe for concurrent use, and one
// Transport is meant to be shared by all the clients of a process that call
// the same upstreams.
//
// A request the breaker declines gets a *breaker.OpenError, for which
// errors.Is(err, breaker.ErrOpen) holds, also through the *url.Error that
// http.Client wraps it in; it is declined without touching the network.
// Once the manager has stopped, every request gets an error that matches
// manager.ErrStopped.
type Transport struct {
	m                *manager.Manager
	clk              clock.Clock
	base             http.RoundTripper
	key              func(*http.Request) string
	config           func(string) manager.Config
	classify         Classifier
	ignoreRetryAfter bool
	maxRetryAfter    time.Duration

	breakers *keyed.Set[struct{}]
}

// New returns a Transport that puts the upstreams of its requests behind
// breakers of m. It fails if m is nil or an option is invalid.
func New(m *manager.Manager, opts Options) (*Transport, error) {
	if m == nil {
		return nil, errors.New("fusebox: httpbreaker.New: the manager is nil")
	}
	if opts.MaxRetryAfter < 0 {
		return nil, fmt.Errorf("fusebox: httpbreaker.New: Options.MaxRetryAfter must not be negative, got %v", opts.MaxRetryAfter)
	}
	t := &Transport{
		m:                m,
		clk:              m.Clock(),
		base:             opts.Base,
		key:              opts.Key,
		config:           opts.Config,
		classify:         opts.Classify,
		ignoreRetryAfter: opts.IgnoreRetryAfter,
		maxRetryAfter:    opts.MaxRetryAfter,
	}
	if t.base == nil {
		t.base = http.DefaultTransport
	}
	if t.key == nil {
		t.key = HostKey
	}
	if t.config == nil {
		t.config = DefaultConfig
	}
	if t.classify == nil {
		t.classify = Classify
	}
	if t.maxRetryAfter == 0 {
		t.maxRetryAfter = DefaultMaxRetryAfter
	}
	t.breakers = keyed.New(m, opts.MaxBreakers, opts.IdleTimeout, t.register)
	return t, nil
}

// RoundTrip implements http.RoundTripper. It asks the breaker of the
// request's key for a permit; a declined request closes the request's body
// and returns the breaker's error without calling the wrapped RoundTripper.
// Otherwise it calls the wrapped RoundTripper, classifies what it returned,
// releases the permit, and returns the response and error unchanged: the
// response's body is neither read nor closed.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	p, err := t.acquire(req)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	released := false
	defer func() {
		if !released { // the wrapped RoundTripper or the Classifier panicked
			p.ReleaseOutcome(classify.Failure)
		}
	}()
	resp, err := t.base.RoundTrip(req)
	o := t.classify(resp, cancelled(req, err))
	released = true
	p.ReleaseWith(o, t.cause(resp, err, o))
	return resp, err
}

// cause is what a request that ended with resp and err, and was classified
// o, opened its breaker with, should it open it: the error, or for a
// response counted as a failure a *StatusError that carries the
// response's Retry-After. It allocates only for such a response.
func (t *Transport) cause(resp *http.Response, err error, o classify.Outcome) error {
	if err != nil || o != classify.Failure || resp == nil {
		return err
	}
	se := &StatusError{StatusCode: resp.StatusCode, Status: resp.Status}
	if !t.ignoreRetryAfter {
		se.Wait, _ = RetryAfter(resp, t.clk.Now())
	}
	return se
}

// CloseIdleConnections closes the idle connections of the wrapped
// RoundTripper, if it has such a method; http.Client.CloseIdleConnections
// calls it.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// register registers key's breaker, or finds the one registered under that
// name by someone else.
func (t *Transport) register(key string) (*manager.Breaker, bool, struct{}, error) {
	cfg := t.config(key)
	if cfg.Classify != nil {
		return nil, false, struct{}{}, fmt.Errorf("fusebox: httpbreaker: breaker %q: Config.Classify is not used by a Transport, which classifies responses with Options.Classify; leave it nil", key)
	}
	if !t.ignoreRetryAfter {
		cfg.Recover = recover.WithHints(cfg.Recover, t.maxRetryAfter)
	}
	b, err := t.m.Register(key, cfg)
	switch {
	case err == nil:
		return b, true, struct{}{}, nil
	case errors.Is(err, manager.ErrDuplicate):
		// Registered by hand or by another Transport sharing the manager:
		// use it as it is. Its recovery policy is its own: a Retry-After
		// reaches it in recover.Context.Err, and keeps it open if the
		// policy honours hints (recover.WithHints).
		if b, ok := t.m.Breaker(key); ok {
			return b, false, struct{}{}, nil
		}
	}
	return nil, false, struct{}{}, err
}

// cancelled makes sure that the error of a request whose context was
// cancelled matches context.Canceled, since the transport may report the
// context's cancellation cause instead.
func cancelled(req *http.Request, err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	if errors.Is(req.Context().Err(), context.Canceled) {
		return fmt.Errorf("%w (%w)", err, context.Canceled)
	}
	return err
}

func closeBody(req *http.Request) {
	if req != nil && req.Body != nil {
		req.Body.Close()
	}
}

func describe(req *http.Request) string {
	if req == nil {
		return "a nil request"
	}
	if req.URL == nil {
		return req.Method + " (no URL)"
	}
	return req.Method + " " + req.URL.Redacted()
}

// StatusError is what opened a breaker when a response the Classifier
// counted as a failure did (a 503, say): the Transport releases such a
// request with it, so that it is the breaker's recover.Context.Err and its
// declined calls' breaker.OpenError.Cause. The caller never gets it: the
// response is returned as it came.
//
// A StatusError is a recover.Hint: RetryAfter is the wait the response's
// Retry-After header asked for, which keeps the breaker open that long
// under recover.WithHints.
type StatusError struct {
	// StatusCode and Status are the response's, such as 503 and
	// "503 Service Unavailable".
	StatusCode int
	Status     string
	// Wait is how long the response's Retry-After header asked the client
	// to wait (see RetryAfter): zero if it did not, or if the Transport
	// ignores Retry-After.
	Wait time.Duration
}

// Error returns, for example, "fusebox: httpbreaker: the upstream answered
// 503 Service Unavailable (Retry-After: 2m0s)".
func (e *StatusError) Error() string {
	status := e.Status
	if status == "" {
		status = strconv.Itoa(e.StatusCode)
	}
	if e.Wait > 0 {
		return fmt.Sprintf("fusebox: httpbreaker: the upstream answered %s (Retry-After: %v)", status, e.Wait)
	}
	return "fusebox: httpbreaker: the upstream answered " + status
}

// RetryAfter returns Wait, implementing recover.Hint.
func (e *StatusError) RetryAfter() time.Duration { return e.Wait }

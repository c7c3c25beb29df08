package grpcbreaker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/keyed"
	"github.com/fusebox-go/fusebox/manager"
	fbrecover "github.com/fusebox-go/fusebox/recover"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Options configure an Interceptor. The zero value is valid.
type Options struct {
	// Key names the breaker a call goes through, from the target of its
	// grpc.ClientConn (ClientConn.Target) and its full method name
	// ("/package.Service/Method"). It must return a non-empty name from a
	// bounded set. Nil means TargetKey, one breaker per target; MethodKey
	// gives one breaker per method of each target.
	Key func(target, method string) string
	// Config returns the configuration of the breaker registered for key,
	// the first time a call has that key. Its Classify field, when set,
	// classifies that breaker's calls instead of Options.Classify. Nil
	// means DefaultConfig.
	Config func(key string) manager.Config
	// Classify decides the outcome of each call let through, from the
	// error the call ended with. Nil means Classify.
	Classify classify.Classifier
	// IgnoreRetryInfo turns off the servers' retry hints: the breakers'
	// recovery policies are used as they are.
	IgnoreRetryInfo bool
	// MaxRetryDelay caps how long a server's retry hint may keep a breaker
	// open. Zero means DefaultMaxRetryDelay; it must not be negative.
	MaxRetryDelay time.Duration
	// MaxBreakers caps how many breakers the Interceptor keeps, however
	// many keys its calls name. Before a new key would exceed it, the
	// Interceptor removes (Manager.Remove) the breakers used least
	// recently, closed ones before open, half-open or probing ones. Zero
	// means DefaultMaxBreakers; a negative value means no cap.
	MaxBreakers int
	// IdleTimeout is how long a breaker no call went through is kept: the
	// Interceptor then removes it (Manager.Remove), whatever its state.
	// Zero means DefaultIdleTimeout; a negative value keeps idle breakers.
	IdleTimeout time.Duration
}

// Defaults of the bounds on an Interceptor's breakers.
const (
	// DefaultMaxBreakers is how many breakers an Interceptor keeps when
	// Options.MaxBreakers is zero.
	DefaultMaxBreakers = keyed.DefaultMax
	// DefaultIdleTimeout is how long a breaker no call went through is kept
	// when Options.IdleTimeout is zero.
	DefaultIdleTimeout = keyed.DefaultIdle
)

// DefaultMaxRetryDelay is the cap on a server's retry hint when
// Options.MaxRetryDelay is zero.
const DefaultMaxRetryDelay = keyed.DefaultMaxRetry

// DefaultConfig is the configuration of a breaker registered by an
// Interceptor whose Options.Config is nil: the fifth failure in a row trips
// it, it stays open 5 seconds after a trip, twice as long after each failed
// probe up to 2 minutes, each open period shortened by up to 20% at random
// so that many clients do not probe at the same instant, and a probe may
// run 5 seconds.
func DefaultConfig(key string) manager.Config { return keyed.DefaultConfig() }

// TargetKey is the default key of a call: the target of its connection, as
// given to grpc.NewClient (such as "dns:///api.example.com:443" or
// "127.0.0.1:50051"). Every connection to one target shares its breaker.
func TargetKey(target, method string) string { return target }

// MethodKey is the key of a breaker per method: the target followed by the
// full method name, such as "127.0.0.1:50051/grpc.health.v1.Health/Check".
func MethodKey(target, method string) string { return target + method }

// Interceptor puts the calls of gRPC clients behind the circuit breakers of
// their targets, registered with a manager.Manager on first use. Create one
// with New and install it on a client with DialOptions (or Unary and
// Stream); it is safe for concurrent use, and one Interceptor is meant to
// be shared by every client of a process.
//
// A declined call gets an error with gRPC status Unavailable, for which
// errors.Is(err, breaker.ErrOpen) also holds (errors.As finds the
// *breaker.OpenError); it is declined without touching the network. Once
// the manager has stopped, every call gets status Unavailable with an error
// that matches manager.ErrStopped.
type Interceptor struct {
	m        *manager.Manager
	key      func(target, method string) string
	config   func(string) manager.Config
	classify classify.Classifier
	hints    bool
	maxDelay time.Duration

	breakers *keyed.Set[*entry]
}

// entry is what the Interceptor keeps with one key's breaker.
type entry struct {
	classify classify.Classifier
	// declined is the error of the calls declined in the breaker's current
	// open period, built once for each *breaker.OpenError.
	declined atomic.Pointer[declinedError]
}

// New returns an Interceptor that puts calls behind breakers of m. It fails
// if m is nil or an option is invalid.
func New(m *manager.Manager, opts Options) (*Interceptor, error) {
	if m == nil {
		return nil, errors.New("fusebox: grpcbreaker.New: the manager is nil")
	}
	if opts.MaxRetryDelay < 0 {
		return nil, fmt.Errorf("fusebox: grpcbreaker.New: Options.MaxRetryDelay must not be negative, got %v", opts.MaxRetryDelay)
	}
	i := &Interceptor{
		m:        m,
		key:      opts.Key,
		config:   opts.Config,
		classify: opts.Classify,
		hints:    !opts.IgnoreRetryInfo,
		maxDelay: opts.MaxRetryDelay,
	}
	if i.key == nil {
		i.key = TargetKey
	}
	if i.config == nil {
		i.config = DefaultConfig
	}
	if i.classify == nil {
		i.classify = Classify
	}
	if i.maxDelay == 0 {
		i.maxDelay = DefaultMaxRetryDelay
	}
	i.breakers = keyed.New(m, opts.MaxBreakers, opts.IdleTimeout, i.register)
	return i, nil
}

// DialOptions returns the options that install the Interceptor on a client
// for both unary and stream calls, after any interceptors installed before:
//
//	conn, err := grpc.NewClient(target, append(i.DialOptions(), creds)...)
func (i *Interceptor) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(i.Unary),
		grpc.WithChainStreamInterceptor(i.Stream),
	}
}

// Unary is a grpc.UnaryClientInterceptor. It asks the breaker of the call's
// key for a permit; a declined call returns status Unavailable without
// calling invoker. Otherwise it calls invoker, classifies the error it
// returned, releases the permit, and returns the error unchanged. If
// invoker or the classifier panics, the call is released as a failure and
// the panic goes on.
func (i *Interceptor) Unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	e, p, err := i.acquire(ctx, cc, method)
	if err != nil {
		return err
	}
	// The trailer is asked for only when hints are on: taking its address
	// costs an allocation per call.
	var trailer *metadata.MD
	if i.hints {
		trailer = new(metadata.MD)
		opts = append(opts[:len(opts):len(opts)], grpc.Trailer(trailer))
	}
	released := false
	defer func() {
		if !released { // invoker panicked
			p.ReleaseOutcome(classify.Failure)
		}
	}()
	err = invoker(ctx, method, req, reply, cc, opts...)
	released = true
	var md metadata.MD
	if trailer != nil {
		md = *trailer
	}
	i.release(e, p, err, md)
	return err
}

// Stream is a grpc.StreamClientInterceptor. It asks the breaker of the
// call's key for a permit; a declined call returns status Unavailable
// without calling streamer. A stream counts once, when it ends: when
// RecvMsg returns io.EOF (a success) or an error, when SendMsg returns an
// error other than io.EOF, when the one response of a stream without server
// streaming has been received, or when the stream's context is done first
// (as status Canceled or DeadlineExceeded). A stream that never ends, whose
// caller neither reads it to the end nor cancels its context, holds its
// permit, as it holds its resources in grpc.
func (i *Interceptor) Stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	e, p, err := i.acquire(ctx, cc, method)
	if err != nil {
		return nil, err
	}
	released := false
	defer func() {
		if !released { // streamer panicked
			p.ReleaseOutcome(classify.Failure)
		}
	}()
	cs, err := streamer(ctx, desc, cc, method, opts...)
	released = true
	if err != nil {
		i.release(e, p, err, nil)
		return nil, err
	}
	s := &stream{ClientStream: cs, ctx: ctx, i: i, e: e, p: p, serverStreams: desc.ServerStreams}
	s.stop = context.AfterFunc(ctx, s.abandon)
	return s, nil
}

// release classifies a call that ended with err and releases its permit,
// exactly once whatever the classifier does: a classifier that panics
// releases the call as a failure, and the panic goes on. A server's retry
// hint goes with the error, for the breaker's recovery policy.
func (i *Interceptor) release(e *entry, p manager.Permit, err error, trailer metadata.MD) {
	released := false
	defer func() {
		if !released {
			p.ReleaseOutcome(classify.Failure)
		}
	}()
	cause := i.cause(err, trailer)
	o := e.classify(cause)
	released = true
	p.ReleaseWith(o, cause)
}

// cause is err, with the wait its server asked for if it asked for one.
func (i *Interceptor) cause(err error, trailer metadata.MD) error {
	if err == nil || !i.hints {
		return err
	}
	if wait, ok := RetryDelay(err, trailer); ok {
		return &hintError{err: err, wait: wait}
	}
	return err
}

// acquire asks the breaker of the call's key for a permit, registering the
// breaker first if the key is new (see package keyed for the bounds). A
// declined call's error is the call's, status Unavailable.
func (i *Interceptor) acquire(ctx context.Context, cc *grpc.ClientConn, method string) (*entry, manager.Permit, error) {
	var target string
	if cc != nil {
		target = cc.Target()
	}
	key := i.key(target, method)
	if key == "" {
		return nil, manager.Permit{}, fmt.Errorf("fusebox: grpcbreaker: the key function returned an empty key for %s on %q", method, target)
	}
	e, p, err := i.breakers.Acquire(ctx, key)
	switch {
	case e == nil:
		return nil, p, err
	case err != nil:
		return nil, p, e.Extra.decline(err)
	}
	return e.Extra, p, nil
}

// register registers key's breaker, or finds the one registered under that
// name by someone else.
func (i *Interceptor) register(key string) (*manager.Breaker, bool, *entry, error) {
	cfg := i.config(key)
	if cfg.Classify == nil {
		cfg.Classify = i.classify
	}
	if i.hints {
		cfg.Recover = fbrecover.WithHints(cfg.Recover, i.maxDelay)
	}
	b, err := i.m.Register(key, cfg)
	switch {
	case err == nil:
		return b, true, &entry{classify: cfg.Classify}, nil
	case errors.Is(err, manager.ErrDuplicate):
		// Registered by hand or by another Interceptor sharing the
		// manager: use it as it is, classified by Options.Classify. A
		// server's retry hint reaches its recovery policy in
		// recover.Context.Err; whether it honours it is that policy's
		// business (see recover.WithHints).
		if b, ok := i.m.Breaker(key); ok {
			return b, false, &entry{classify: i.classify}, nil
		}
	}
	return nil, false, nil, err
}

// decline turns the error of a declined Acquire into the call's error.
func (e *entry) decline(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	if d := e.declined.Load(); d != nil && d.cause == err {
		return d
	}
	d := newDeclined(err)
	e.declined.Store(d)
	return d
}

// declinedError is the error of a declined call: gRPC status Unavailable,
// with the breaker's error in its chain.
type declinedError struct {
	cause error
	st    *status.Status
	msg   string
}

func newDeclined(cause error) *declinedError {
	st := status.New(codes.Unavailable, cause.Error())
	return &declinedError{cause: cause, st: st, msg: st.Err().Error()}
}

func (d *declinedError) Error() string              { return d.msg }
func (d *declinedError) Unwrap() error              { return d.cause }
func (d *declinedError) GRPCStatus() *status.Status { return d.st }

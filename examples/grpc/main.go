// Command grpc calls a gRPC server through grpcbreaker and prints what the
// server's breaker does.
//
//	go run ./examples/grpc
//
// The server is grpc's health service on a loopback port. For its first 1.5
// seconds it answers every check with status Unavailable and a RetryInfo
// detail asking for a second's wait; then it answers SERVING. A client
// checks it every 150ms through a grpcbreaker.Interceptor, each call with a
// deadline of 500ms. The breaker trips on the second failure in a row; its
// own policy would keep it open 250ms, but the server asked for a second, so
// it stays open a second. Calls made meanwhile are declined at once with
// status Unavailable, without reaching the server. After the open period
// one call goes through as the probe: the first still finds the server
// failing and re-opens the breaker, the next one succeeds and closes it. An
// eventlog.Logger prints each transition. The run takes about 3 seconds.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/eventlog"
	"github.com/fusebox-go/fusebox/grpcbreaker"
	"github.com/fusebox-go/fusebox/manager"
	fbrecover "github.com/fusebox-go/fusebox/recover" // not recover: the name would hide the builtin recover()
)

// The run's settings, all in one place.
const (
	failFor   = 1500 * time.Millisecond // the server fails this long
	retryIn   = time.Second             // the wait its RetryInfo asks for
	callEvery = 150 * time.Millisecond
	deadline  = 500 * time.Millisecond // each call's own deadline
	runFor    = 3 * time.Second
	tripAfter = 2                      // failures in a row that trip the breaker
	openFor   = 250 * time.Millisecond // the breaker's own open period
)

func main() {
	if _, err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "grpc:", err)
		os.Exit(1)
	}
}

// result is what run counted.
type result struct {
	calls    int             // calls the client made
	sent     int             // of which the breaker let through
	declined int             // of which the breaker declined
	probes   int             // of which were probes
	hits     int64           // calls the server received
	opened   []time.Duration // each open period, as the breaker set it, to the millisecond
	final    breaker.State
}

// flaky is the health service: Unavailable with RetryInfo until failUntil,
// SERVING afterwards.
type flaky struct {
	healthpb.UnimplementedHealthServer
	failUntil time.Time
	hits      atomic.Int64
}

func (f *flaky) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	f.hits.Add(1)
	if time.Now().Before(f.failUntil) {
		st, err := status.New(codes.Unavailable, "overloaded").
			WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryIn)})
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func run(w io.Writer) (result, error) {
	out := &syncWriter{w: w}
	start := time.Now()
	since := func(t time.Time) string { return fmt.Sprintf("+%.2fs", t.Sub(start).Seconds()) }

	// The server, on a loopback TCP port.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	svc := &flaky{failUntil: start.Add(failFor)}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, svc)
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(lis)
	}()
	defer func() {
		srv.Stop()
		<-served
	}()
	target := lis.Addr().String()

	m := manager.Start(manager.Options{})
	defer m.Stop()

	// One line per transition, with its time since the start of the run.
	events, err := eventlog.Start(m, eventlog.Options{
		Logger: slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{
			ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
				switch {
				case len(groups) > 0:
				case a.Key == slog.TimeKey, a.Key == slog.LevelKey:
					return slog.Attr{}
				case a.Key == "at":
					return slog.String("at", since(a.Value.Time()))
				}
				return a
			},
		})),
	})
	if err != nil {
		return result{}, err
	}
	defer events.Close()

	interceptor, err := grpcbreaker.New(m, grpcbreaker.Options{
		Config: func(target string) manager.Config {
			return manager.Config{
				Strategy: breaker.Consecutive{Failures: tripAfter},
				Recover:  fbrecover.BasicTimeout{Open: openFor, ProbeTimeout: time.Second},
			}
		},
	})
	if err != nil {
		return result{}, err
	}
	conn, err := grpc.NewClient(target, append(interceptor.DialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		return result{}, err
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)

	fmt.Fprintf(out, "server %s answers Unavailable with RetryInfo %v for %v, then SERVING\n", target, retryIn, failFor)
	fmt.Fprintf(out, "its breaker trips on %d failures in a row and stays open %v, or as long as the server asks\n\n", tripAfter, openFor)

	var res result
	tick := time.NewTicker(callEvery)
	defer tick.Stop()
	for now := start; now.Sub(start) < runFor; now = <-tick.C {
		res.calls++
		probe := false
		if b, ok := m.Breaker(target); ok {
			probe = b.State() == breaker.HalfOpen
		}
		at := since(time.Now())
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		var open *breaker.OpenError
		switch {
		case errors.As(err, &open):
			res.declined++
			fmt.Fprintf(out, "%s call %2d: %s, declined without a request (breaker %s until %s)\n", at, res.calls, status.Code(err), open.State, since(open.Until))
			if b, ok := m.Breaker(open.Name); ok {
				if s := b.Snapshot(); s.State == breaker.Open && !s.Until.IsZero() {
					if d := s.Until.Sub(s.Since).Round(time.Millisecond); len(res.opened) == 0 || res.opened[len(res.opened)-1] != d {
						res.opened = append(res.opened, d)
					}
				}
			}
		default:
			res.sent++
			what := "sent"
			if probe {
				res.probes++
				what = "sent as the probe"
			}
			answer := status.Code(err).String()
			if err == nil {
				answer = resp.GetStatus().String()
			}
			fmt.Fprintf(out, "%s call %2d: %s: %s\n", at, res.calls, what, answer)
		}
	}

	m.Sync()
	events.Close() // every transition is printed before the summary
	res.hits = svc.hits.Load()
	b, _ := m.Breaker(target)
	res.final = b.Stats().State
	fmt.Fprintf(out, "\n%d calls: %d sent (the server received %d), %d declined without a request, %d probes\n",
		res.calls, res.sent, res.hits, res.declined, res.probes)
	fmt.Fprintf(out, "open periods: %v (the policy alone says %v); the breaker ends %s\n", res.opened, openFor, res.final)
	return res, nil
}

// syncWriter lets the call loop and the event logger print to one writer.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

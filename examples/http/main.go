// Command http calls an HTTP upstream through httpbreaker and prints what the
// upstream's breaker does.
//
//	go run ./examples/http
//
// The upstream is a server on loopback that answers 503 Service Unavailable
// with "Retry-After: 1" for its first 1.5 seconds, then 200 OK. A client
// sends it a request every 150ms through an httpbreaker.Transport. The
// breaker trips on the second failure in a row; its own policy would keep it
// open 250ms, but the upstream asked for a second, so it stays open a
// second. Requests made meanwhile are declined without a connection being
// made. After the open period one request goes through as the probe: the
// first still finds the upstream failing and re-opens the breaker, the next
// one succeeds and closes it. An eventlog.Logger prints each transition.
// The run takes about 3 seconds.
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/eventlog"
	"github.com/fusebox-go/fusebox/httpbreaker"
	"github.com/fusebox-go/fusebox/manager"
	fbrecover "github.com/fusebox-go/fusebox/recover" // not recover: the name would hide the builtin recover()
)

// The run's settings, all in one place.
const (
	failFor      = 1500 * time.Millisecond // the upstream fails this long
	retryAfter   = "1"                     // the Retry-After of its 503s, in seconds
	requestEvery = 150 * time.Millisecond
	runFor       = 3 * time.Second
	tripAfter    = 2                      // failures in a row that trip the breaker
	openFor      = 250 * time.Millisecond // the breaker's own open period
)

func main() {
	if _, err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "http:", err)
		os.Exit(1)
	}
}

// result is what run counted.
type result struct {
	requests int             // requests the client made
	sent     int             // of which the breaker let through
	declined int             // of which the breaker declined
	probes   int             // of which were probes
	hits     int64           // requests the upstream received
	opened   []time.Duration // each open period, as the breaker set it, to the millisecond
	final    breaker.State
}

func run(w io.Writer) (result, error) {
	out := &syncWriter{w: w}
	start := time.Now()
	since := func(t time.Time) string { return fmt.Sprintf("+%.2fs", t.Sub(start).Seconds()) }

	var hits atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if time.Since(start) < failFor {
			w.Header().Set("Retry-After", retryAfter)
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	defer upstream.Close()

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

	base := &http.Transport{}
	defer base.CloseIdleConnections()
	transport, err := httpbreaker.New(m, httpbreaker.Options{
		Base: base,
		Config: func(key string) manager.Config {
			return manager.Config{
				Strategy: breaker.Consecutive{Failures: tripAfter},
				Recover:  fbrecover.BasicTimeout{Open: openFor, ProbeTimeout: time.Second},
			}
		},
	})
	if err != nil {
		return result{}, err
	}
	client := &http.Client{Transport: transport, Timeout: time.Second}

	fmt.Fprintf(out, "upstream %s answers 503 with Retry-After: %ss for %v, then 200\n", upstream.Listener.Addr(), retryAfter, failFor)
	fmt.Fprintf(out, "its breaker trips on %d failures in a row and stays open %v, or as long as the upstream asks\n\n", tripAfter, openFor)

	var res result
	tick := time.NewTicker(requestEvery)
	defer tick.Stop()
	for now := start; now.Sub(start) < runFor; now = <-tick.C {
		res.requests++
		probe := false
		if b, ok := m.Breaker(upstream.Listener.Addr().String()); ok {
			probe = b.State() == breaker.HalfOpen
		}
		at := since(time.Now())
		resp, err := client.Get(upstream.URL + "/stock")
		var open *breaker.OpenError
		switch {
		case errors.As(err, &open):
			res.declined++
			fmt.Fprintf(out, "%s request %2d: declined, no connection made (breaker %s until %s)\n", at, res.requests, open.State, since(open.Until))
			if b, ok := m.Breaker(open.Name); ok {
				if s := b.Snapshot(); s.State == breaker.Open && !s.Until.IsZero() {
					if d := s.Until.Sub(s.Since).Round(time.Millisecond); len(res.opened) == 0 || res.opened[len(res.opened)-1] != d {
						res.opened = append(res.opened, d)
					}
				}
			}
		case err != nil:
			return res, err
		default:
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			res.sent++
			what := "sent"
			if probe {
				res.probes++
				what = "sent as the probe"
			}
			fmt.Fprintf(out, "%s request %2d: %s: %s\n", at, res.requests, what, resp.Status)
		}
	}

	m.Sync()
	events.Close() // every transition is printed before the summary
	res.hits = hits.Load()
	b, _ := m.Breaker(upstream.Listener.Addr().String())
	st := b.Stats()
	res.final = st.State
	fmt.Fprintf(out, "\n%d requests: %d sent (the upstream received %d), %d declined without touching the network, %d probes\n",
		res.requests, res.sent, res.hits, res.declined, res.probes)
	fmt.Fprintf(out, "open periods: %v (the policy alone says %v); the breaker ends %s\n", res.opened, openFor, res.final)
	return res, nil
}

// syncWriter lets the request loop and the event logger print to one
// writer.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// Dashboard serves the fusebox dashboard for a flaky service called
// through a breaker, so you can watch the breaker trip and recover in a
// browser.
//
//	go run ./examples/dashboard                 # then open the address it prints
//	go run ./examples/dashboard -duration=3s    # a short run, as in CI
//
// The flaky service is an HTTP server on loopback that works for the first
// 60% of every period (-period, 10s by default) and answers 500 for the
// rest. A few goroutines call it through the breaker "inventory", and a
// steady service through the breaker "catalog". The dashboard is served on
// a loopback port (-addr) with its force-open and reset buttons (-actions).
// The program stops after -duration (60s by default) or on Ctrl-C, with
// every goroutine it started stopped.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/dashboard"
	"github.com/fusebox-go/fusebox/manager"
	fbrecover "github.com/fusebox-go/fusebox/recover" // not recover: the name would hide the builtin recover()
)

// config is what the flags set.
type config struct {
	duration time.Duration // how long the program runs
	period   time.Duration // the flaky service's cycle: 60% working, 40% failing
	addr     string        // where the dashboard listens
	actions  bool          // whether the page has force-open and reset buttons
}

func main() {
	var cfg config
	flag.DurationVar(&cfg.duration, "duration", 60*time.Second, "how long to run before exiting")
	flag.DurationVar(&cfg.period, "period", 10*time.Second, "the flaky service's cycle: it works for 60% of it and fails for the rest")
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:0", "the dashboard's listening address (port 0: any free port)")
	flag.BoolVar(&cfg.actions, "actions", true, "serve the force-open and reset buttons")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, nil); err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}

// run runs the program until cfg.duration has passed or ctx is done. Once
// the dashboard is being served, it calls ready, if not nil, with its URL.
func run(ctx context.Context, cfg config, out io.Writer, ready func(url string)) error {
	if cfg.duration <= 0 {
		return fmt.Errorf("-duration must be positive, got %v", cfg.duration)
	}
	if cfg.period < 100*time.Millisecond {
		return fmt.Errorf("-period must be at least 100ms, got %v", cfg.period)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()

	start := time.Now()
	svc := httptest.NewServer(services(start, cfg.period))
	defer svc.Close()

	m := manager.Start(manager.Options{})
	defer m.Stop()
	inventory, err := m.Register("inventory", manager.Config{
		Strategy: breaker.Consecutive{Failures: 3},
		Recover:  fbrecover.Exponential{Initial: cfg.period / 10, Max: cfg.period / 2, Jitter: 0.2},
	})
	if err != nil {
		return err
	}
	catalog, err := m.Register("catalog", manager.Config{
		Strategy: breaker.FailureRate{Rate: 0.5, Window: 50, MinCalls: 20},
	})
	if err != nil {
		return err
	}

	h, err := dashboard.New(m, dashboard.Options{Title: "fusebox example", Actions: cfg.actions})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	web := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- web.Serve(ln) }()

	url := "http://" + ln.Addr().String() + "/"
	fmt.Fprintf(out, "dashboard: %s\n", url)
	if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() && cfg.actions {
		fmt.Fprintln(out, "warning: the dashboard's actions are served on a non-loopback address")
	}
	fmt.Fprintf(out, "running for %v (Ctrl-C stops earlier); the inventory service fails for %v of every %v\n",
		cfg.duration, cfg.period*4/10, cfg.period)
	if ready != nil {
		ready(url)
	}

	var wg sync.WaitGroup
	client := svc.Client()
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			callEvery(ctx, inventory, client, svc.URL+"/inventory", 50*time.Millisecond+time.Duration(i)*7*time.Millisecond)
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); callEvery(ctx, catalog, client, svc.URL+"/catalog", 80*time.Millisecond) }()

	events, unsubscribe := m.Subscribe(256)
	defer unsubscribe()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-events:
				if !ok {
					return
				}
				fmt.Fprintf(out, "%6.1fs  %-9s  %-20s  %s\n", time.Since(start).Seconds(), ev.Name, ev.Transition, ev.Cause)
			}
		}
	}()

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	wg.Wait()
	// Close ends the page's event streams, so that Shutdown need not wait
	// for them.
	h.Close()
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShutdown()
	if err := web.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}

	for _, b := range []*manager.Breaker{inventory, catalog} {
		st := b.Stats()
		fmt.Fprintf(out, "%-9s  %-9s  calls %5d  succeeded %5d  failed %4d  declined %5d\n",
			st.Name, st.State, st.Calls, st.Successes, st.Failures, st.Declined)
	}
	return nil
}

// services serves /inventory, which works for the first 60% of every
// period since start and answers 500 for the rest, and /catalog, which
// always works.
func services(start time.Time, period time.Duration) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/inventory", func(w http.ResponseWriter, r *http.Request) {
		if time.Since(start)%period >= period*6/10 {
			http.Error(w, "inventory is down", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/catalog", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	return mux
}

var errStatus = errors.New("the service answered 5xx")

// callEvery calls url through b at the given pace until ctx is done.
func callEvery(ctx context.Context, b *manager.Breaker, client *http.Client, url string, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		_ = b.Do(callCtx, func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			if resp.StatusCode >= 500 {
				return errStatus
			}
			return nil
		})
		cancel()
	}
}

// Quickstart calls a flaky service through a fusebox breaker and prints what
// the breaker did.
//
//	go run ./examples/quickstart
//
// The service is an HTTP server on loopback that works, then answers every
// request with a 500, then hangs (each request waits longer than a caller is
// willing to), then works again. A few goroutines call it through one
// breaker, each call with its own timeout. The program prints a timeline of
// the breaker's transitions as they happen, then a summary of the calls, and
// exits after about 6.5 seconds with every goroutine it started stopped.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	fbrecover "github.com/fusebox-go/fusebox/recover" // not recover: the name would hide the builtin recover()
)

// The run's settings, all in one place.
const (
	callers     = 4                      // goroutines calling the service
	callEvery   = 25 * time.Millisecond  // each caller's pace
	callTimeout = 300 * time.Millisecond // each call's context timeout
	tripAfter   = 3                      // failures in a row that trip the breaker
	hangFor     = 2 * time.Second        // how long the hanging service makes a request wait
)

// schedule is what the service does, and from when. The run ends at the
// last entry.
var schedule = []struct {
	at    time.Duration
	mode  mode
	about string
}{
	{0, working, "working: every request gets a 200"},
	{1500 * time.Millisecond, failing, "failing: every request gets a 500"},
	{2800 * time.Millisecond, hanging, "hanging: every request waits 2s, longer than a call's 300ms timeout"},
	{4000 * time.Millisecond, working, "working again"},
	{6500 * time.Millisecond, working, "end of the run: the callers stop"},
}

func main() {
	if _, err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// result is what run counted.
type result struct {
	stats    manager.Stats // the breaker's own counts, at the end
	requests uint64        // requests the service received
	probes   int           // half_open -> probing transitions
}

func run(out io.Writer) (result, error) {
	svc := &service{}
	srv := httptest.NewServer(svc)
	// Close waits for the requests in flight, then closes the connections of
	// srv.Client() too.
	defer srv.Close()
	client := srv.Client()

	m := manager.Start(manager.Options{})
	defer m.Stop()
	b, err := m.Register("flaky", manager.Config{
		Strategy: breaker.Consecutive{Failures: tripAfter},
		Recover: fbrecover.Exponential{
			Initial: 200 * time.Millisecond, // the first open period
			Max:     time.Second,            // open periods double up to this
			Jitter:  0.2,                    // each period is 80% to 100% of that
			// Longer than a call's timeout: a probe that hangs fails by its
			// own timeout and re-opens the breaker, rather than being given
			// up on while it still runs.
			ProbeTimeout: 500 * time.Millisecond,
		},
	})
	if err != nil {
		return result{}, err
	}
	events, unsubscribe := m.Subscribe(256)

	fmt.Fprintf(out, "%d callers call a flaky service every %v each, through the breaker %q.\n", callers, callEvery, b.Name())
	fmt.Fprintf(out, "A call times out after %v; %d failures in a row trip the breaker.\n\n", callTimeout, tripAfter)
	fmt.Fprintf(out, "%7s  %-7s  %-20s  %s\n", "time", "who", "transition", "cause, outcome")

	start := time.Now()
	tl := &timeline{out: out, start: start, entered: start}
	printed := make(chan struct{})
	go func() {
		defer close(printed)
		tl.follow(events, svc)
	}()

	var tally tally
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(callEvery)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				tally.add(call(b, client, srv.URL))
			}
		}()
	}

	<-printed // the timeline ends with the schedule
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	m.Sync() // every transition made by the last calls has been handled...
	unsubscribe()
	for ev := range events { // ...and is printed before the summary
		tl.event(ev)
	}

	st := b.Stats()
	fmt.Fprintf(out, "\nSummary after %.1fs:\n", elapsed.Seconds())
	fmt.Fprintf(out, "  calls made           %6d\n", st.Calls)
	fmt.Fprintf(out, "  reached the service  %6d  the service counted %d requests\n", st.Successes+st.Failures+st.Ignored, svc.requests.Load())
	fmt.Fprintf(out, "    succeeded          %6d\n", st.Successes)
	fmt.Fprintf(out, "    failed             %6d  %d got a 500, %d timed out\n", st.Failures, tally.status500.Load(), tally.timeouts.Load())
	fmt.Fprintf(out, "  declined at once     %6d  the breaker answered without calling the service\n", st.Declined)
	fmt.Fprintf(out, "  probes made          %6d  %d failed, %d succeeded\n", tl.probes, tl.probesFailed, tl.probesSucceeded)
	fmt.Fprintf(out, "  final state          %6s\n", st.State)
	return result{stats: st, requests: svc.requests.Load(), probes: tl.probes}, nil
}

// call makes one GET through the breaker, with its own timeout.
func call(b *manager.Breaker, client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return b.Do(ctx, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err // a timeout wraps context.DeadlineExceeded: a failure
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode >= 500 {
			return errStatus500
		}
		return nil
	})
}

var errStatus500 = errors.New("the service answered 500")

// tally is what the callers saw, by kind of failure.
type tally struct {
	status500, timeouts atomic.Uint64
}

func (t *tally) add(err error) {
	switch {
	case errors.Is(err, errStatus500):
		t.status500.Add(1)
	case errors.Is(err, context.DeadlineExceeded):
		t.timeouts.Add(1)
	}
}

type mode int32

const (
	working mode = iota
	failing
	hanging
)

// service is the flaky service: what it does depends on its mode.
type service struct {
	mode     atomic.Int32
	requests atomic.Uint64
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	switch mode(s.mode.Load()) {
	case failing:
		http.Error(w, "failing", http.StatusInternalServerError)
	case hanging:
		t := time.NewTimer(hangFor)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done(): // the caller gave up
		}
	default:
		fmt.Fprintln(w, "ok")
	}
}

// timeline prints the service's changes of mode and the breaker's
// transitions, each with the time since the start, and counts the probes.
type timeline struct {
	out     io.Writer
	start   time.Time
	entered time.Time // when the breaker entered its current state

	probes, probesFailed, probesSucceeded int
}

// follow switches the service's mode on schedule and prints the breaker's
// events as they come, until the end of the schedule.
func (tl *timeline) follow(events <-chan manager.Event, svc *service) {
	for i, step := range schedule {
		next := time.NewTimer(time.Until(tl.start.Add(step.at)))
	wait:
		for {
			select {
			case ev := <-events:
				tl.event(ev)
			case <-next.C:
				break wait
			}
		}
		svc.mode.Store(int32(step.mode))
		tl.line(time.Since(tl.start), "service", step.about)
		if i == len(schedule)-1 {
			return
		}
	}
}

func (tl *timeline) event(ev manager.Event) {
	in := short(ev.At.Sub(tl.entered))
	tl.entered = ev.At
	t := ev.Transition
	var why string
	switch {
	case ev.Cause == breaker.CauseTrip:
		why = fmt.Sprintf("%d failures in a row", tripAfter)
	case ev.Cause == breaker.CauseTimer && t.From == breaker.Open:
		why = fmt.Sprintf("open for %v: the next call will be the probe", in)
	case ev.Cause == breaker.CauseTimer:
		why = fmt.Sprintf("the probe ran out of time after %v", in)
	case ev.Cause == breaker.CauseProbe && t.To == breaker.Probing:
		tl.probes++
		why = "one call goes through; the others are declined"
	case ev.Cause == breaker.CauseProbe && t.To == breaker.Closed:
		tl.probesSucceeded++
		why = fmt.Sprintf("the probe succeeded after %v: calls go through again", in)
	case ev.Cause == breaker.CauseProbe && t.To == breaker.Open:
		tl.probesFailed++
		why = fmt.Sprintf("the probe failed after %v", in)
	}
	cause := ev.Cause.String()
	if ev.Outcome != 0 {
		cause += ", " + ev.Outcome.String()
	}
	tl.line(ev.At.Sub(tl.start), ev.Name, fmt.Sprintf("%-20s  %-14s  %s", t.From.String()+" -> "+t.To.String(), cause, why))
}

func (tl *timeline) line(at time.Duration, who, what string) {
	fmt.Fprintf(tl.out, "%6.2fs  %-7s  %s\n", at.Seconds(), who, strings.TrimSpace(what))
}

// short rounds d for reading: to the millisecond, or to a tenth of one below
// 10ms.
func short(d time.Duration) time.Duration {
	if d < 10*time.Millisecond {
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

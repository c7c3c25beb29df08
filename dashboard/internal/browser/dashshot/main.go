// Command dashshot takes the screenshot of the dashboard shown in
// docs/observability.md. It scripts a few breakers through a day's worth of
// trouble on a fake clock, serves the dashboard on a loopback port, and
// photographs the page in headless Chromium, started the way the browser
// tests start it.
//
//	go run ./dashboard/internal/browser/dashshot -o docs/dashboard.png
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/chromedp/chromedp"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/dashboard"
	"github.com/fusebox-go/fusebox/dashboard/internal/browser/headless"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

func main() {
	out := flag.String("o", "docs/dashboard.png", "where to write the PNG")
	width := flag.Int("width", 1280, "the browser window's width in pixels")
	flag.Parse()
	if err := run(*out, *width); err != nil {
		log.Fatal("dashshot: ", err)
	}
}

func run(out string, width int) error {
	exe, err := headless.Find()
	if err != nil {
		return err
	}
	s, err := newScene()
	if err != nil {
		return err
	}
	defer s.stop()
	h, err := dashboard.New(s.m, dashboard.Options{Title: "checkout-service", Actions: true})
	if err != nil {
		return err
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Close()
	if err := s.play(); err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "dashshot-profile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	br, err := headless.Start(context.Background(), headless.Options{ExecPath: exe, UserDataDir: dir, Width: width, Height: 900})
	if err != nil {
		return err
	}
	defer br.Close()
	ctx, cancel := context.WithTimeout(br.Ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		return err
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`Number(document.body.dataset.updates) >= 1`)); err != nil {
		return err
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return err
	}
	if errs := br.Errors(); len(errs) > 0 {
		return fmt.Errorf("the page reported errors: %q", errs)
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%d bytes)\n", out, len(png))
	return nil
}

// errs are what each breaker's dependency answers when it fails.
var errs = map[string]error{
	"payments":              errors.New("POST /v1/charges: context deadline exceeded"),
	"inventory":             errors.New("fusebox: httpbreaker: the upstream answered 503 Service Unavailable"),
	"search":                errors.New("dial tcp 10.0.4.7:9200: connect: connection refused"),
	"recommendations":       errors.New("rpc error: code = Unavailable desc = connection reset by peer"),
	"ledger-replica":        errors.New("replica lag 42s"),
	"api.partner-7.example": errors.New("GET /quotes: 429 Too Many Requests"),
}

// scene is a manager on a fake clock with breakers in every state, one of
// them ("search") shared with another process of the fleet, web-7, and one
// ("api.partner-7.example") in a dry run.
type scene struct {
	mock  *clock.Mock
	m     *manager.Manager
	web7  *manager.Manager
	t0    time.Time
	b     map[string]*manager.Breaker
	other *manager.Breaker // web-7's "search"
}

func newScene() (*scene, error) {
	s := &scene{mock: clock.NewMock(), t0: time.Date(2026, 3, 14, 11, 58, 0, 0, time.UTC), b: map[string]*manager.Breaker{}}
	s.mock.Set(s.t0)
	s.m = manager.Start(manager.Options{Clock: s.mock, Name: "web-3"})
	s.web7 = manager.Start(manager.Options{Clock: s.mock, Name: "web-7"})
	fleet := store.NewMemory(s.mock)
	searchCfg := manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Recover: recover.BasicTimeout{Open: 20 * time.Second}, Store: fleet}
	for _, r := range []struct {
		name string
		cfg  manager.Config
	}{
		{"payments", manager.Config{Strategy: breaker.Consecutive{Failures: 5}, Recover: recover.BasicTimeout{Open: 15 * time.Second}}},
		{"inventory", manager.Config{Strategy: breaker.FailureRate{Rate: 0.5, Window: 20, MinCalls: 10}, Recover: recover.BasicTimeout{Open: 30 * time.Second}}},
		{"search", searchCfg},
		{"recommendations", manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Recover: recover.BasicTimeout{Open: 10 * time.Second, ProbeTimeout: 30 * time.Second}}},
		{"ledger-replica", manager.Config{}},
		{"api.partner-7.example", manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Recover: recover.BasicTimeout{Open: time.Minute}, DryRun: true}},
	} {
		b, err := s.m.Register(r.name, r.cfg)
		if err != nil {
			s.stop()
			return nil, err
		}
		s.b[r.name] = b
	}
	other, err := s.web7.Register("search", searchCfg)
	if err != nil {
		s.stop()
		return nil, err
	}
	s.other = other
	return s, nil
}

func (s *scene) stop() {
	s.m.Stop()
	s.web7.Stop()
}

// at moves the fake clock to t0+sec and lets the managers fire their
// timers and follow the fleet.
func (s *scene) at(sec float64) {
	s.mock.Set(s.t0.Add(time.Duration(sec * float64(time.Second))))
	s.sync()
}

func (s *scene) sync() {
	for range 2 {
		s.web7.Sync()
		s.m.Sync()
	}
}

// calls makes n calls through the named breaker, failing every one whose
// index i has fail(i).
func (s *scene) calls(name string, n int, fail func(i int) bool) {
	callsThrough(s.b[name], n, fail)
}

func callsThrough(b *manager.Breaker, n int, fail func(i int) bool) {
	for i := range n {
		_ = b.Do(context.Background(), func(context.Context) error {
			if fail != nil && fail(i) {
				return errs[b.Name()]
			}
			return nil
		})
	}
}

func always(int) bool { return true }

// play runs two minutes of traffic and trouble.
func (s *scene) play() error {
	s.at(2)
	s.calls("payments", 900, func(i int) bool { return i%150 == 7 })
	s.calls("inventory", 400, func(i int) bool { return i%40 == 3 })
	s.calls("search", 600, func(i int) bool { return i%200 == 11 })
	s.calls("recommendations", 350, nil)
	s.calls("ledger-replica", 120, nil)
	s.calls("api.partner-7.example", 75, func(i int) bool { return i%25 == 0 })

	s.at(20)
	s.calls("inventory", 20, func(i int) bool { return i%3 != 0 }) // trips
	s.at(30)
	s.calls("payments", 5, always) // trips
	s.calls("payments", 26, nil)   // declined
	s.at(45)                       // payments: half_open
	s.at(46)
	s.calls("payments", 940, func(i int) bool { return i%200 == 50 })
	_ = s.b["payments"].Do(context.Background(), func(context.Context) error { return context.Canceled })
	s.at(50) // inventory: half_open
	s.at(52)
	s.calls("inventory", 1, always) // the probe fails
	s.calls("inventory", 14, nil)   // declined
	s.at(82)                        // inventory: half_open again
	s.at(83)
	s.calls("inventory", 380, func(i int) bool { return i%50 == 9 }) // the probe succeeds, then traffic
	s.at(90)
	if err := s.b["ledger-replica"].ForceOpen(); err != nil {
		return err
	}
	s.calls("ledger-replica", 42, nil) // declined
	s.at(95)
	callsThrough(s.other, 3, always) // web-7's calls trip the fleet's search
	s.sync()
	s.calls("search", 57, nil)                  // declined
	s.calls("api.partner-7.example", 3, always) // would trip: a dry run opens
	s.calls("api.partner-7.example", 18, nil)   // and lets them through
	s.at(100)
	s.calls("recommendations", 3, always) // trips
	s.calls("recommendations", 31, nil)   // declined
	s.at(110)                             // recommendations: half_open
	s.at(112)
	s.calls("inventory", 20, func(i int) bool { return i%4 != 0 }) // trips again
	s.calls("inventory", 9, nil)                                   // declined
	s.at(115)                                                      // search: half_open
	s.at(117)
	if _, err := s.b["recommendations"].Acquire(context.Background()); err != nil { // the probe, held open
		return err
	}
	s.calls("recommendations", 6, nil) // declined while probing
	s.at(120)
	s.calls("payments", 140, nil)
	s.calls("api.partner-7.example", 25, nil)
	s.sync()
	return nil
}

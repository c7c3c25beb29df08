package prommetrics_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/metrics/prommetrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Register the collector with a registry and serve it; here one scrape is
// made by hand and the transition and state lines are printed.
func Example() {
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()
	b, err := m.Register("payments", manager.Config{})
	if err != nil {
		log.Fatal(err)
	}

	c, err := prommetrics.New(m, prommetrics.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)

	_ = b.ForceOpen()
	m.Sync()

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		// Every pair of states has its transitions_total series, at zero
		// until it happens; print those that happened.
		if strings.HasPrefix(line, "fusebox_breaker_transitions_total") && !strings.HasSuffix(line, " 0") ||
			strings.HasPrefix(line, "fusebox_breaker_state{") {
			fmt.Println(line)
		}
	}
	// Output:
	// fusebox_breaker_state{breaker="payments",state="closed"} 0
	// fusebox_breaker_state{breaker="payments",state="half_open"} 0
	// fusebox_breaker_state{breaker="payments",state="open"} 1
	// fusebox_breaker_state{breaker="payments",state="probing"} 0
	// fusebox_breaker_transitions_total{breaker="payments",from="closed",to="open"} 1
}

// Serve the breakers' metrics with the rest of the program's, from the
// default registry.
func Example_defaultRegistry() {
	m := manager.Start(manager.Options{})
	defer m.Stop()

	c, err := prommetrics.New(m, prommetrics.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	prometheus.MustRegister(c)
	http.Handle("/metrics", promhttp.Handler())
	log.Fatal(http.ListenAndServe("127.0.0.1:9090", nil))
}

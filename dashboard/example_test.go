package dashboard_test

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/dashboard"
	"github.com/fusebox-go/fusebox/manager"
)

// Mount the dashboard under a path of its own; the page is at /fusebox/
// and its data at /fusebox/api/status.
func Example() {
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()
	b, err := m.Register("payments", manager.Config{})
	if err != nil {
		log.Fatal(err)
	}

	h, err := dashboard.New(m, dashboard.Options{Title: "checkout"})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	mux := http.NewServeMux()
	mux.Handle("/fusebox/", http.StripPrefix("/fusebox", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	_ = b.ForceOpen()
	m.Sync()

	resp, err := http.Get(srv.URL + "/fusebox/api/status")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var st dashboard.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		log.Fatal(err)
	}
	for _, b := range st.Breakers {
		fmt.Printf("%s: %s, forced %v, %d transition(s)\n", b.Name, b.State, b.Forced, len(b.Transitions))
	}
	// Output:
	// payments: open, forced true, 1 transition(s)
}

// With Options.Actions the page has force-open and reset buttons. Scripts
// may use the same routes with the token in the X-Fusebox-Token header.
func ExampleOptions_actions() {
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()
	b, err := m.Register("payments", manager.Config{})
	if err != nil {
		log.Fatal(err)
	}
	h, err := dashboard.New(m, dashboard.Options{Actions: true, Token: "from-a-secret-store"})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, token := range []string{"", "from-a-secret-store"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/force-open?breaker=payments", nil)
		req.Header.Set(dashboard.TokenHeader, token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Printf("token %q: %d, breaker %s\n", token, resp.StatusCode, b.State())
	}
	// Output:
	// token "": 403, breaker closed
	// token "from-a-secret-store": 204, breaker open
}

// Package dashboard serves a live web page showing the breakers of a fusebox
// manager: each breaker's state as a colour, its counters, and a timeline of
// its recent transitions, updated as they happen through Server-Sent
// Events. The page is self-contained (its HTML, CSS and script are embedded
// in the program and nothing is fetched from elsewhere), and the same data is
// served as JSON.
//
// Mount the Handler under a path of your own and close it when done:
//
//	h, err := dashboard.New(m, dashboard.Options{})
//	if err != nil { ... }
//	defer h.Close()
//	mux.Handle("/fusebox/", http.StripPrefix("/fusebox", h))
//
// The handler's routes, relative to where it is mounted:
//
//	GET  /                 the page
//	GET  /api/status       the Status as JSON
//	GET  /api/events       a text/event-stream of "status" events, each a Status as JSON
//	POST /api/force-open   breaker=NAME (form body or query): Breaker.ForceOpen (only with Options.Actions)
//	POST /api/reset        breaker=NAME (form body or query): Breaker.Reset (only with Options.Actions)
//
// # Security
//
// The page shows breaker names, which may come from outside (a request's
// host, say): the script builds the page with text nodes only, never with
// markup taken from data, and the page's Content-Security-Policy allows no
// inline script.
//
// The force-open and reset buttons change how the program behaves, so they
// exist only with Options.Actions. Even then they answer POST only (other
// methods get 405), reject cross-origin browser requests
// (by their Sec-Fetch-Site and Origin headers), and require the X-Fusebox-Token header to
// hold the handler's token, which the page carries and a page from another
// origin cannot read. The handler does no authentication of its own: mount
// it behind whatever protects your other administrative pages, or serve it
// on a loopback address only.
package dashboard

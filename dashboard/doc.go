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
//	GET  /api/events       a text/event-stream: one "snapshot" event, then "delta" events
//	POST /api/force-open   breaker=NAME (form body or query): Breaker.ForceOpen (only with Options.Actions)
//	POST /api/reset        breaker=NAME (form body or query): Breaker.Reset (only with Options.Actions)
//
// # The event stream
//
// A stream starts with a "snapshot" event holding every breaker; then each
// "delta" event holds only the breakers that changed since the one before,
// sent as transitions happen and, for counters that moved, every
// Options.Refresh. Each message is encoded once and every stream sends the
// same bytes; a stream that falls behind gets a new snapshot, and so does a
// client that reconnects. Each event's data is a JSON object:
//
//	seq      the message's number: a delta's is one more than the message before
//	now      the manager's clock, in Unix milliseconds; the times below are milliseconds from it
//	halted   whether the manager has stopped
//	title, actions, history   (snapshot only) Options.Title, Options.Actions, Options.History
//	process  (snapshot only) the manager's process name (manager.Options.Name)
//	names    [[id, name], ...]: breakers new to the stream (every breaker, in a snapshot)
//	gone     [id, ...]: breakers removed
//	b        records, one per breaker: [id, state, since, until, flags, calls,
//	         successes, failures, ignored, declined, stale, dropped_events,
//	         missed_transitions, slow_calls, calls (declined ones included) per 100 s over the last minute,
//	         failures per thousand over the last minute, processes, would_decline,
//	         why, transitions]
//
// state is 0 closed, 1 open, 2 half_open, 3 probing; until is null when
// there is no timer; flags has 1 for forced, 2 for shared, 4 for store down,
// 8 for a dry run. processes is BreakerStatus.Processes; would_decline
// BreakerStatus.WouldDecline; why is who opened the breaker and why ("opened
// by web-7: dial tcp ...", or the error's text alone for a breaker kept in
// its process; "" while closed). transitions are [from, to, at, cause,
// outcome] (outcome 0 none, 1 success, 2 failure, 3 ignore), with a sixth
// element, err, for an opening with an Event.Err: every one kept in a
// snapshot, only the new ones in a delta.
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
// origin cannot read. Every route checks the request's Host header (see
// Options.Hosts), so that a page served under another name by DNS
// rebinding gets nothing. The handler does no authentication of its own: mount
// it behind whatever protects your other administrative pages, or serve it
// on a loopback address only.
package dashboard

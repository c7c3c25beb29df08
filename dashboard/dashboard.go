package dashboard

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/fusebox-go/fusebox/manager"
)

// Defaults for Options.
const (
	DefaultTitle       = "fusebox"
	DefaultHistory     = 20
	DefaultRefresh     = time.Second
	DefaultEventBuffer = 4096
	DefaultMaxStreams  = 64
	// MaxHistory bounds Options.History: the handler keeps this many
	// transitions per breaker at most.
	MaxHistory = 1000
	// TokenHeader is the request header that must carry the handler's
	// token on the force-open and reset actions.
	TokenHeader = "X-Fusebox-Token"
)

// Options configure a Handler. The zero value is valid: a read-only page.
type Options struct {
	// Title names the page, for example after the service. Empty means
	// DefaultTitle.
	Title string
	// Actions adds the force-open and reset buttons and the POST routes
	// behind them. Off by default: with it, anyone who can reach the
	// handler can open a breaker (see the package doc).
	Actions bool
	// Token is the value the actions require in the X-Fusebox-Token header.
	// Empty means a random token made by New, which only the page knows;
	// set one to script the actions from elsewhere. Ignored without
	// Actions.
	Token string
	// History is how many recent transitions are kept per breaker. Zero
	// means DefaultHistory; it may not be negative or above MaxHistory.
	History int
	// Refresh is how often the event stream sends the counters while no
	// breaker changes state; a transition is sent at once. Zero means
	// DefaultRefresh; it may not be negative or below 10ms.
	Refresh time.Duration
	// Hosts lists the host names (with or without a port) the handler
	// answers to, checked against each request's Host header so that a
	// page served under another name by DNS rebinding gets nothing. Empty
	// means the address the request came in on (an IP address, with or
	// without its port) and, on a loopback address, "localhost": list the
	// names the dashboard is reached by when it is served under one. Other
	// hosts get 421 Misdirected Request.
	Hosts []string
	// MaxStreams bounds the event streams open at once; one more gets 503.
	// Zero means DefaultMaxStreams; it may not be negative.
	MaxStreams int
	// EventBuffer is the buffer of the handler's subscription to the
	// manager's events. Below 1 means DefaultEventBuffer; above
	// 262,144 (1<<18) is an error. Transitions that
	// arrive while it is full are missing from the timelines and counted in
	// BreakerStatus.MissedTransitions.
	EventBuffer int
}

// Handler is the dashboard: an http.Handler serving the page, its data and,
// with Options.Actions, its actions. Create it with New and end it with
// Close. It is safe for concurrent use.
type Handler struct {
	m     *manager.Manager
	opts  Options
	hub   *hub
	hosts map[string]bool
	mux   *http.ServeMux
	page  []byte
	quit  chan struct{}
	close sync.Once

	mu      sync.Mutex // guards closed, open and streams.Add
	closed  bool
	open    int
	streams sync.WaitGroup
}

//go:embed assets
var assets embed.FS

var pageTemplate = template.Must(template.ParseFS(assets, "assets/index.html"))

// New returns a dashboard of the breakers of m. It subscribes to m's
// events at once, so timelines start now; Close ends the subscription. New
// fails, naming the field, if m is nil or an option is out of range.
func New(m *manager.Manager, opts Options) (*Handler, error) {
	if m == nil {
		return nil, errors.New("fusebox: dashboard.New: the manager is nil")
	}
	if opts.Title == "" {
		opts.Title = DefaultTitle
	}
	switch {
	case opts.History < 0 || opts.History > MaxHistory:
		return nil, fmt.Errorf("fusebox: dashboard.New: Options.History is %d; it must be between 0 (for %d) and %d", opts.History, DefaultHistory, MaxHistory)
	case opts.History == 0:
		opts.History = DefaultHistory
	}
	switch {
	case opts.Refresh < 0 || (opts.Refresh > 0 && opts.Refresh < 10*time.Millisecond):
		return nil, fmt.Errorf("fusebox: dashboard.New: Options.Refresh is %v; it must be 0 (for %v) or at least 10ms", opts.Refresh, DefaultRefresh)
	case opts.Refresh == 0:
		opts.Refresh = DefaultRefresh
	}
	if opts.EventBuffer < 1 {
		opts.EventBuffer = DefaultEventBuffer
	}
	switch {
	case opts.MaxStreams < 0:
		return nil, fmt.Errorf("fusebox: dashboard.New: Options.MaxStreams is %d; it must be 0 (for %d) or more", opts.MaxStreams, DefaultMaxStreams)
	case opts.MaxStreams == 0:
		opts.MaxStreams = DefaultMaxStreams
	}
	hosts := make(map[string]bool, len(opts.Hosts))
	for _, host := range opts.Hosts {
		if host == "" || strings.ContainsAny(host, "/ ") {
			return nil, fmt.Errorf("fusebox: dashboard.New: Options.Hosts: %q is not a host name", host)
		}
		hosts[strings.ToLower(host)] = true
	}
	if opts.Actions && opts.Token == "" {
		var b [16]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand)
		opts.Token = hex.EncodeToString(b[:])
	}
	if !opts.Actions {
		opts.Token = ""
	}

	h := &Handler{m: m, opts: opts, hosts: hosts, quit: make(chan struct{})}
	var page bytes.Buffer
	if err := pageTemplate.Execute(&page, struct {
		Title   string
		Actions bool
		Token   string
	}{opts.Title, opts.Actions, opts.Token}); err != nil {
		return nil, fmt.Errorf("fusebox: dashboard.New: page: %w", err)
	}
	h.page = page.Bytes()

	static, _ := fs.Sub(assets, "assets")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.servePage)
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /api/status", h.serveStatus)
	mux.HandleFunc("GET /api/events", h.serveEvents)
	if opts.Actions {
		mux.Handle("POST /api/force-open", sameOrigin(h.action((*manager.Breaker).ForceOpen)))
		mux.Handle("POST /api/reset", sameOrigin(h.action((*manager.Breaker).Reset)))
	}
	h.mux = mux
	hb, err := startHub(m, opts.Title, opts.Actions, opts.History, opts.EventBuffer, opts.Refresh)
	if err != nil {
		return nil, fmt.Errorf("fusebox: dashboard.New: Options.EventBuffer: %w", err)
	}
	h.hub = hb
	return h, nil
}

// securityHeaders are sent with every response: no script but the page's
// own file, no framing, no guessing of content types.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options":  "nosniff",
	"Referrer-Policy":         "no-referrer",
	"X-Frame-Options":         "DENY",
}

// ServeHTTP serves the page, its assets, its data and its actions (see the
// package doc for the routes). After Close, every request gets 503.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for k, v := range securityHeaders {
		w.Header().Set(k, v)
	}
	select {
	case <-h.quit:
		http.Error(w, "fusebox dashboard closed", http.StatusServiceUnavailable)
		return
	default:
	}
	if !h.hostAllowed(r) {
		http.Error(w, fmt.Sprintf("fusebox dashboard: host %q is not served here (see dashboard.Options.Hosts)", r.Host), http.StatusMisdirectedRequest)
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) servePage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(h.page)
}

func (h *Handler) serveStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(h.status())
}

// serveEvents streams the breakers: a full "snapshot" at once, then a
// "delta" message for each change, holding only the breakers that changed.
// Every stream sends the same encoded messages; one that falls behind the
// messages the handler keeps gets a new snapshot. It returns when the
// client goes away or the handler is closed.
func (h *Handler) serveEvents(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	switch {
	case h.closed:
		h.mu.Unlock()
		http.Error(w, "fusebox dashboard closed", http.StatusServiceUnavailable)
		return
	case h.open >= h.opts.MaxStreams:
		h.mu.Unlock()
		w.Header().Set("Retry-After", "10")
		http.Error(w, fmt.Sprintf("fusebox dashboard: %d event streams are open already (Options.MaxStreams)", h.opts.MaxStreams), http.StatusServiceUnavailable)
		return
	}
	h.open++
	h.streams.Add(1)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.open--
		h.mu.Unlock()
		h.streams.Done()
	}()

	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	// A stalled client must not hold the stream (and Close) forever.
	const writeTimeout = 10 * time.Second
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	send := func(ps ...[]byte) error {
		if err := rc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		for _, p := range ps {
			if _, err := w.Write(p); err != nil {
				return err
			}
		}
		return rc.Flush()
	}
	if err := send([]byte("retry: 2000\n\n")); err != nil {
		if errors.Is(err, http.ErrNotSupported) {
			http.Error(w, "fusebox dashboard: streaming is not supported here", http.StatusInternalServerError)
		}
		return
	}
	snap, seq, next := h.hub.snapshot()
	if err := send(snap); err != nil {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-h.quit:
			return
		case <-next:
		}
		msgs, n, ok := h.hub.since(seq)
		next = n
		if !ok {
			snap, seq, next = h.hub.snapshot()
			if err := send(snap); err != nil {
				return
			}
			continue
		}
		if len(msgs) == 0 {
			continue
		}
		data := make([][]byte, len(msgs))
		for i, m := range msgs {
			data[i] = m.data
		}
		if err := send(data...); err != nil {
			return
		}
		seq = msgs[len(msgs)-1].seq
	}
}

// hostAllowed reports whether the request's Host is one the handler
// serves: one of Options.Hosts, or else the address the request came in
// on, and "localhost" on a loopback address.
func (h *Handler) hostAllowed(r *http.Request) bool {
	host := strings.ToLower(r.Host)
	if len(h.hosts) > 0 {
		if h.hosts[host] {
			return true
		}
		if name, _, err := net.SplitHostPort(host); err == nil && h.hosts[name] {
			return true
		}
		return false
	}
	name := host
	if n, _, err := net.SplitHostPort(host); err == nil {
		name = n
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	var localIP net.IP
	if tcp, ok := local.(*net.TCPAddr); ok {
		localIP = tcp.IP
	}
	if ip := net.ParseIP(name); ip != nil {
		return localIP == nil || ip.Equal(localIP) || (ip.IsLoopback() && localIP.IsLoopback())
	}
	return name == "localhost" && (localIP == nil || localIP.IsLoopback())
}

// action serves a POST that applies do to the breaker named by the value
// "breaker" of the form body or, failing that, of the query.
func (h *Handler) action(do func(*manager.Breaker) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get(TokenHeader)
		if subtle.ConstantTimeCompare([]byte(got), []byte(h.opts.Token)) != 1 {
			http.Error(w, "fusebox dashboard: missing or wrong "+TokenHeader+" header", http.StatusForbidden)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		name := r.FormValue("breaker")
		b, ok := h.m.Breaker(name)
		if !ok {
			http.Error(w, fmt.Sprintf("fusebox dashboard: no breaker named %q", name), http.StatusNotFound)
			return
		}
		if err := do(b); err != nil {
			http.Error(w, fmt.Sprintf("fusebox dashboard: breaker %q: %v", name, err), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// Close ends the handler: open event streams end, the subscription to the
// manager's events ends, and Close waits for the handler's goroutine and
// for the streams to return. Afterwards every request gets 503. Calling
// Close more than once does nothing more.
func (h *Handler) Close() {
	h.close.Do(func() {
		h.mu.Lock()
		h.closed = true
		close(h.quit)
		h.mu.Unlock()
		h.hub.close()
		h.streams.Wait()
	})
}

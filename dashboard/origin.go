package dashboard

import (
	"net/http"
	"net/url"
)

// sameOrigin lets a request through to next only if it comes from the page's
// own origin: a browser's Sec-Fetch-Site must say "same-origin" (or "none",
// a request the user typed), and without that header an Origin, when sent,
// must name the request's own host. A request with neither header is not
// from a browser, and so carries no ambient credentials to abuse; it still
// needs the token. Cross-origin requests get 403.
func sameOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !fromSameOrigin(r) {
			http.Error(w, "fusebox dashboard: cross-origin request refused", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func fromSameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
	default:
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

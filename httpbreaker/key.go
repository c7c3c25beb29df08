package httpbreaker

import (
	"net"
	"net/http"
	"strings"
)

// HostKey is the default key of a request: the host and port of its URL,
// such as "api.example.com:443" or "127.0.0.1:8080". The host is lowercased,
// and a missing port is filled in from the scheme (80 for http, 443 for
// https), so that "https://API.example.com/" and "https://api.example.com:443/"
// share one breaker. It returns "" for a request without a URL or host,
// which the Transport refuses with an error.
func HostKey(req *http.Request) string {
	if req == nil || req.URL == nil {
		return ""
	}
	u := req.URL
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return ""
	}
	if port != "" && !hasUpper(host) {
		return u.Host // already canonical: no allocation
	}
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "http", "ws":
			port = "80"
		case "https", "wss":
			port = "443"
		}
	}
	host = strings.ToLower(host)
	if port == "" {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, port)
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

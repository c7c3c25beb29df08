package httpbreaker

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fusebox-go/fusebox/classify"
)

// Classifier turns the result of one round trip into an outcome for the
// upstream's breaker. resp and err are what the wrapped RoundTripper
// returned; resp's body must not be read. A Classifier runs on the caller's
// goroutine for every request let through, so it must be fast and must not
// block. An outcome other than Success, Failure or Ignore counts as Failure.
type Classifier func(resp *http.Response, err error) classify.Outcome

// Classify is the classification HTTP clients usually want, and the
// Transport's default:
//
//   - an error for which errors.Is(err, context.Canceled) holds is Ignore:
//     the caller gave up, which says nothing about the upstream;
//   - any other error is a Failure: a refused or reset connection, a TLS
//     failure, a deadline exceeded (context.DeadlineExceeded), a timeout;
//   - a response with status 408 Request Timeout (the upstream timed out
//     reading the request), 429 Too Many Requests, or 500 and above, is a
//     Failure;
//   - a response with any other status (1xx to 4xx but 408 and 429) is a
//     Success: the upstream answered, and a 404 or 400 is the caller's
//     business;
//   - no response and no error, which only a broken RoundTripper returns,
//     is a Failure.
//
// The error is looked at first, so a response returned together with an
// error is classified by the error. Classify can be used on its own, for
// example inside a custom Classifier that treats some statuses differently.
func Classify(resp *http.Response, err error) classify.Outcome {
	if err != nil {
		return classify.Default(err)
	}
	if resp == nil {
		return classify.Failure
	}
	switch {
	case resp.StatusCode == http.StatusRequestTimeout,
		resp.StatusCode == http.StatusTooManyRequests,
		resp.StatusCode >= 500:
		return classify.Failure
	}
	return classify.Success
}

// RetryAfter returns how long after now the response's Retry-After header
// asks the client to wait, and whether it asks for a wait at all. It reads
// the header of 429 Too Many Requests and 503 Service Unavailable responses
// only, in either form the header allows: a number of seconds
// ("Retry-After: 120") or an HTTP date ("Retry-After: Wed, 21 Oct 2026
// 07:28:00 GMT"). A missing or malformed header, a date not after now, or a
// nil response reports false.
func RetryAfter(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp == nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return 0, false
	}
	return parseRetryAfter(resp.Header.Get("Retry-After"), now)
}

// maxRetrySeconds keeps a delta-seconds value far from overflowing a
// time.Duration; any cap a Transport applies is much lower.
const maxRetrySeconds = 100 * 365 * 24 * 60 * 60

func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > maxRetrySeconds {
			// Only a number too long to parse fails here: treat it as the
			// longest wait, which the Transport caps.
			n = maxRetrySeconds
		}
		if n == 0 {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := at.Sub(now)
	if d <= 0 {
		return 0, false
	}
	return d, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

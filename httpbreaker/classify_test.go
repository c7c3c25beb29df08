package httpbreaker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/httpbreaker"
)

func TestClassify(t *testing.T) {
	status := func(code int) *http.Response { return &http.Response{StatusCode: code} }
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cases := []struct {
		name string
		resp *http.Response
		err  error
		want classify.Outcome
	}{
		{"100", status(100), nil, classify.Success},
		{"200", status(200), nil, classify.Success},
		{"204", status(204), nil, classify.Success},
		{"302", status(302), nil, classify.Success},
		{"400", status(400), nil, classify.Success},
		{"404", status(404), nil, classify.Success},
		{"407", status(407), nil, classify.Success},
		{"408", status(408), nil, classify.Failure},
		{"409", status(409), nil, classify.Success},
		{"428", status(428), nil, classify.Success},
		{"429", status(429), nil, classify.Failure},
		{"431", status(431), nil, classify.Success},
		{"500", status(500), nil, classify.Failure},
		{"502", status(502), nil, classify.Failure},
		{"503", status(503), nil, classify.Failure},
		{"504", status(504), nil, classify.Failure},
		{"599", status(599), nil, classify.Failure},
		{"connection refused", nil, refused, classify.Failure},
		{"wrapped in url.Error", nil, &url.Error{Op: "Get", URL: "http://x", Err: refused}, classify.Failure},
		{"canceled", nil, context.Canceled, classify.Ignore},
		{"canceled in url.Error", nil, &url.Error{Op: "Get", URL: "http://x", Err: context.Canceled}, classify.Ignore},
		{"deadline exceeded", nil, context.DeadlineExceeded, classify.Failure},
		{"deadline exceeded wrapped", nil, fmt.Errorf("read: %w", context.DeadlineExceeded), classify.Failure},
		{"other error", nil, errors.New("tls: bad certificate"), classify.Failure},
		{"error wins over a response", status(200), errors.New("broken"), classify.Failure},
		{"nothing at all", nil, nil, classify.Failure},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, httpbreaker.Classify(tc.resp, tc.err), tc.name)
	}
}

func TestHostKey(t *testing.T) {
	cases := []struct {
		url  string
		want string
	}{
		{"http://example.com/a", "example.com:80"},
		{"https://example.com/a?b=c", "example.com:443"},
		{"https://Example.COM/", "example.com:443"},
		{"https://example.com:8443/", "example.com:8443"},
		{"HTTPS://EXAMPLE.com:8443/", "example.com:8443"},
		{"http://127.0.0.1:8080/x", "127.0.0.1:8080"},
		{"http://[::1]:8080/x", "[::1]:8080"},
		{"http://[::1]/x", "[::1]:80"},
		{"ftp://example.com/x", "example.com"},
		{"http://user:pass@example.com/", "example.com:80"},
	}
	for _, tc := range cases {
		u, err := url.Parse(tc.url)
		if !assert.NoError(t, err, tc.url) {
			continue
		}
		assert.Equal(t, tc.want, httpbreaker.HostKey(&http.Request{URL: u}), tc.url)
	}
	assert.Empty(t, httpbreaker.HostKey(nil), "nil request")
	assert.Empty(t, httpbreaker.HostKey(&http.Request{}), "no URL")
	assert.Empty(t, httpbreaker.HostKey(&http.Request{URL: &url.URL{Path: "/x"}}), "no host")
}

func TestHostKeyDoesNotAllocateForCanonicalHosts(t *testing.T) {
	req := &http.Request{URL: &url.URL{Scheme: "http", Host: "127.0.0.1:8080"}}
	allocs := testing.AllocsPerRun(100, func() { httpbreaker.HostKey(req) })
	assert.Zero(t, allocs)
}

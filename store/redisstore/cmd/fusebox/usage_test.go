package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Bad usage exits 2, with what is wrong and the usage on stderr, before
// any connection is tried.
func TestBadUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "no command"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"show"}, "show takes one breaker name, got 0 arguments"},
		{[]string{"reset", "a", "b"}, "reset takes one breaker name, got 2 arguments"},
		{[]string{"forget"}, "forget takes one breaker name, got 0 arguments"},
		{[]string{"list", "payments"}, `list takes no argument, got ["payments"]`},
		{[]string{"-redis", "x:1", "-cluster", "y:1", "list"}, "use one of -redis, -cluster and -sentinel"},
		{[]string{"-timeout", "0s", "list"}, "-timeout must be positive"},
		{[]string{"-timeout", "soon", "list"}, "invalid value"},
		{[]string{"-verbose", "list"}, "flag provided but not defined: -verbose"},
		{[]string{"-redis", "http://127.0.0.1:1", "list"}, "-redis: redis: invalid URL scheme: http"},
		{[]string{"-redis", "redis://u:secret%zz@127.0.0.1:1", "list"}, "-redis: invalid URL escape"},
		{[]string{"-cluster", "a", "list"}, `-cluster: "a" is not host:port`},
		{[]string{"-sentinel", "127.0.0.1:1", "list"}, "want MASTER@host:port"},
		{[]string{"-prefix", "a{b", "list"}, "must not contain '{' or '}'"},
	}
	for _, tt := range tests {
		r := fusebox(tt.args...)
		assert.Equal(t, 2, r.code, "exit status of %q", tt.args)
		assert.Contains(t, r.stderr, tt.want, "stderr of %q", tt.args)
		assert.Contains(t, r.stderr, usage, "stderr of %q has the usage", tt.args)
		assert.Empty(t, r.stdout, "stdout of %q", tt.args)
		assert.NotContains(t, r.stderr, "secret", "stderr of %q shows no password", tt.args)
	}
}

// -h, -help and help print the usage on stdout and exit 0.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"-help"}, {"help"}, {"list", "-h"}} {
		r := fusebox(args...)
		assert.Equal(t, 0, r.code, "exit status of %q", args)
		assert.Equal(t, usage, r.stdout, "stdout of %q", args)
		assert.Empty(t, r.stderr, "stderr of %q", args)
	}
	assert.True(t, strings.HasPrefix(usage, "Usage: fusebox "), "the usage starts by saying how to call it")
}

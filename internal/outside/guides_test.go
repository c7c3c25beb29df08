package outside_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// minor is a go directive's language version: "1.26" for "1.26.0".
func minor(goVersion string) string {
	parts := strings.SplitN(goVersion, ".", 3)
	return strings.Join(parts[:min(2, len(parts))], ".")
}

// TestGuidesInstall checks what the guides say a module needs against its
// go.mod: the go get line, the Go it needs, what an older go line of the
// user's go.mod is raised to, and the version of the dependency that
// needs it.
func TestGuidesInstall(t *testing.T) {
	rootDir := root(t)
	mods := modules(t, rootDir)
	// read returns a guide with its lines joined, as a reader sees it.
	read := func(guide string) string {
		raw, err := os.ReadFile(filepath.Join(rootDir, "docs", guide))
		require.NoError(t, err)
		return strings.Join(strings.Fields(string(raw)), " ")
	}
	says := func(text, want, what string, args ...any) {
		t.Helper()
		assert.True(t, strings.Contains(text, want), "%s: it should say %q", fmt.Sprintf(what, args...), want)
	}
	cases := []struct {
		guide, module, dependency string
	}{
		{"shared-state.md", "store/redisstore", "github.com/redis/go-redis/v9"},
		{"grpc.md", "grpcbreaker", "google.golang.org/grpc"},
		{"replicate.md", "replicate/boltstore", "go.etcd.io/bbolt"},
		{"observability.md", "metrics/prommetrics", "github.com/prometheus/client_golang"},
		{"observability.md", "metrics/otelmetrics", "go.opentelemetry.io/otel"},
	}
	started := read("getting-started.md")
	says(started, "go get "+core+" ", "getting-started.md")
	says(started, "Go "+minor(byPath(t, mods, core).Go)+" or newer", "getting-started.md: the core's Go")
	for _, c := range cases {
		m := byPath(t, mods, core+"/"+c.module)
		text := read(c.guide)
		says(text, "go get "+m.Path, "%s: the go get line of %s", c.guide, m.Path)
		says(text, "Go "+minor(m.Go)+" or newer", "%s: the Go %s needs (its go directive: %s)", c.guide, m.Path, m.Go)
		says(text, "to "+m.Go+".", "%s: what go get raises an older go line to for %s", c.guide, m.Path)
		v := m.Requires[c.dependency]
		require.NotEmpty(t, v, "%s requires %s", m.Path, c.dependency)
		says(text, v, "%s: the version of %s that %s requires", c.guide, c.dependency, m.Path)
		says(started, "`go get "+m.Path+"` | "+minor(m.Go)+" |", "getting-started.md: the row of %s", m.Path)
	}
	says(read("shared-state.md"), "`github.com/redis/go-redis/v9`", "shared-state.md: the Redis client's import path")
}

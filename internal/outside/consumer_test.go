package outside_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// escape is a module path as the proxy protocol spells it in URLs and
// folders: each upper-case letter as '!' and the letter in lower case.
func escape(p string) string {
	var b strings.Builder
	for _, r := range p {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// owner returns the module whose folder holds file: the deepest one.
func owner(mods []module, file string) *module {
	var best *module
	for i := range mods {
		d := mods[i].Dir
		if d == "." || file == d || strings.HasPrefix(file, d+"/") {
			if best == nil || len(d) > len(best.Dir) || best.Dir == "." {
				best = &mods[i]
			}
		}
	}
	return best
}

// writeProxy lays out every module of mods at version under dir as a Go
// module proxy serves it (GOPROXY=file://dir): for each module,
// <escaped path>/@v/list, VERSION.info, VERSION.mod and VERSION.zip, whose
// files sit under "path@version/". A module's zip holds the files of its
// folder except those of modules nested in it, as the go command's own
// zips do.
func writeProxy(t *testing.T, rootDir string, mods []module, version, dir string) {
	t.Helper()
	files := map[string][]string{}
	for _, f := range repoFiles(t, rootDir) {
		if m := owner(mods, filepath.ToSlash(f)); m != nil {
			files[m.Path] = append(files[m.Path], f)
		}
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	require.NoError(t, err)
	for _, m := range mods {
		at := filepath.Join(dir, filepath.FromSlash(escape(m.Path)), "@v")
		require.NoError(t, os.MkdirAll(at, 0o755))
		gomod, err := os.ReadFile(filepath.Join(rootDir, m.Dir, "go.mod"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(at, "list"), []byte(version+"\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(at, version+".info"), info, 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(at, version+".mod"), gomod, 0o644))

		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		prefix := m.Path + "@" + version + "/"
		for _, f := range files[m.Path] {
			rel := strings.TrimPrefix(f, m.Dir+"/")
			if m.Dir == "." {
				rel = f
			}
			data, err := os.ReadFile(filepath.Join(rootDir, f))
			require.NoError(t, err)
			w, err := zw.Create(prefix + rel)
			require.NoError(t, err)
			_, err = w.Write(data)
			require.NoError(t, err)
		}
		require.NoError(t, zw.Close())
		require.NoError(t, os.WriteFile(filepath.Join(at, version+".zip"), buf.Bytes(), 0o644))
	}
}

// consumerMain uses one package of each module the consumer requires.
const consumerMain = `package main

import (
	"fmt"

	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/metrics/prommetrics"
	"github.com/fusebox-go/fusebox/store/redisstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

func main() {
	m := manager.Start(manager.Options{})
	defer m.Stop()
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer client.Close()
	b, err := m.Register("payments", manager.Config{Store: redisstore.New(client, redisstore.Options{})})
	if err != nil {
		panic(err)
	}
	c, err := prommetrics.New(m, prommetrics.Options{})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	prometheus.NewRegistry().MustRegister(c)
	fmt.Println(b.Name())
}
`

// network tells a failure to reach the module proxy (or the checksum
// database) from a failure of the build.
var network = regexp.MustCompile(`dial tcp|lookup .*: |no such host|connection refused|i/o timeout|TLS handshake timeout|network is unreachable|server misbehaving`)

// TestConsumer builds a program outside the workspace against the modules
// as the module proxy would serve them once released: the repository is
// released (scripts/release.sh, in a copy) at a version of this run's own,
// and the core, store/redisstore and metrics/prommetrics at that version
// come from a file:// proxy this test writes from the release, their
// third-party dependencies from the module cache or the real proxy.
// Without the workspace, each module's go.mod alone must resolve the
// others; and the consumer's go directive, the newest of theirs, must not
// have to rise.
func TestConsumer(t *testing.T) {
	repo := copyRepo(t)
	// A version no release will have, so that it can go into the user's
	// module cache (where the third-party packages are already built) and
	// be removed from it afterwards without touching anything else.
	version := fmt.Sprintf("v0.0.0-outside.%d", time.Now().UnixNano())
	out, code := release(t, repo, version)
	require.Equal(t, 0, code, "scripts/release.sh %s:\n%s", version, out)
	mods := modules(t, repo)
	redisstore := byPath(t, mods, core+"/store/redisstore")
	prommetrics := byPath(t, mods, core+"/metrics/prommetrics")

	tmp := t.TempDir()
	proxyDir := filepath.Join(tmp, "proxy")
	writeProxy(t, repo, mods, version, proxyDir)

	goVersion := "1.0"
	for _, m := range []module{byPath(t, mods, core), redisstore, prommetrics} {
		if versionLess(goVersion, m.Go) {
			goVersion = m.Go
		}
	}
	app := filepath.Join(tmp, "app")
	require.NoError(t, os.Mkdir(app, 0o755))
	gomod := fmt.Sprintf(`module example.com/app

go %s

require (
	%s %s
	%s %s
	%s %s
	github.com/prometheus/client_golang %s
	github.com/redis/go-redis/v9 %s
)
`, goVersion, core, version, redisstore.Path, version, prommetrics.Path, version,
		prommetrics.Requires["github.com/prometheus/client_golang"], redisstore.Requires["github.com/redis/go-redis/v9"])
	require.NoError(t, os.WriteFile(filepath.Join(app, "go.mod"), []byte(gomod), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(app, "main.go"), []byte(consumerMain), 0o644))
	// The checksums the repository has of the third-party modules, so that
	// the checksum database is asked only about what they miss.
	var sums []string
	for _, m := range mods {
		if raw, err := os.ReadFile(filepath.Join(repo, m.Dir, "go.sum")); err == nil {
			sums = append(sums, strings.Split(strings.TrimSpace(string(raw)), "\n")...)
		}
	}
	sort.Strings(sums)
	require.NoError(t, os.WriteFile(filepath.Join(app, "go.sum"), []byte(strings.Join(dedupe(sums), "\n")+"\n"), 0o644))

	cache := goEnv(t, "GOMODCACHE")
	t.Cleanup(func() { forget(t, cache, mods, version) })
	env := []string{
		"GOWORK=off",
		"GOTOOLCHAIN=local",
		// The fusebox modules from the file proxy, the rest as usual.
		"GOPROXY=" + fileURL(proxyDir) + "," + goEnv(t, "GOPROXY"),
		"GONOSUMDB=" + core, // not published: no checksum database knows them
		// -modcacherw: forget can remove this version from the cache.
		"GOFLAGS=" + strings.TrimSpace(goEnv(t, "GOFLAGS")+" -mod=mod -modcacherw"),
	}
	out2, err := goCmd(app, env, "build", "-o", filepath.Join(tmp, "app.bin"), ".").CombinedOutput()
	if err != nil && network.Match(out2) {
		t.Skipf("skipping: the module proxy or the checksum database cannot be reached:\n%s", out2)
	}
	require.NoError(t, err, "go build of a module outside the workspace that requires %s, %s and %s at %s:\n%s",
		core, redisstore.Path, prommetrics.Path, version, out2)

	after, err := os.ReadFile(filepath.Join(app, "go.mod"))
	require.NoError(t, err)
	assert.Contains(t, string(after), "\ngo "+goVersion+"\n",
		"the consumer's go directive, %s, the newest of the modules it requires, rose:\n%s", goVersion, after)
}

// forget removes version of every module of mods from the module cache:
// what was extracted, what was downloaded, its line in the version lists,
// and the folders that leaves empty.
func forget(t *testing.T, cache string, mods []module, version string) {
	t.Helper()
	for _, m := range mods {
		esc := filepath.FromSlash(escape(m.Path))
		extracted := filepath.Join(cache, esc+"@"+version)
		assert.NoError(t, os.RemoveAll(extracted))
		removeEmpty(cache, filepath.Dir(extracted))
		dl := filepath.Join(cache, "cache", "download", esc, "@v")
		matches, _ := filepath.Glob(filepath.Join(dl, version+".*"))
		for _, f := range matches {
			assert.NoError(t, os.Remove(f))
		}
		list := filepath.Join(dl, "list")
		if raw, err := os.ReadFile(list); err == nil {
			var keep []string
			for _, v := range strings.Fields(string(raw)) {
				if v != version {
					keep = append(keep, v)
				}
			}
			if len(keep) == 0 {
				assert.NoError(t, os.Remove(list))
			} else {
				assert.NoError(t, os.WriteFile(list, []byte(strings.Join(keep, "\n")+"\n"), 0o644))
			}
		}
		removeEmpty(cache, dl)
	}
}

// removeEmpty removes dir and its parents below top, as long as they are
// empty.
func removeEmpty(top, dir string) {
	for dir != top && strings.HasPrefix(dir, top) && os.Remove(dir) == nil {
		dir = filepath.Dir(dir)
	}
}

func fileURL(dir string) string {
	return "file://" + path.Clean(filepath.ToSlash(dir))
}

func dedupe(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if s != "" && (i == 0 || s != sorted[i-1]) {
			out = append(out, s)
		}
	}
	return out
}

// versionLess compares two go directives, such as "1.24" and "1.26.0".
func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for len(pa) < 3 {
		pa = append(pa, "0")
	}
	for len(pb) < 3 {
		pb = append(pb, "0")
	}
	for i := range 3 {
		var x, y int
		fmt.Sscan(pa[i], &x)
		fmt.Sscan(pb[i], &y)
		if x != y {
			return x < y
		}
	}
	return false
}

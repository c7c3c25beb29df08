package outside_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// module is one module of the workspace, as its go.mod says.
type module struct {
	Path     string            // module path
	Dir      string            // folder, relative to the repository's root ("." for the core)
	Go       string            // go directive
	Requires map[string]string // module path to version
}

// root returns the repository's root: the folder of go.work.
func root(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "no go.work above the test's folder")
		dir = parent
	}
}

// goCmd returns a go command run in dir with the given environment added.
func goCmd(dir string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// goEnv returns the value of one go env variable.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	require.NoError(t, err, "go env %s", name)
	return strings.TrimSpace(string(out))
}

// modules returns every module of the workspace, read from go.work and
// the go.mod files.
func modules(t *testing.T, rootDir string) []module {
	t.Helper()
	out, err := goCmd(rootDir, nil, "work", "edit", "-json").Output()
	require.NoError(t, err, "go work edit -json")
	var work struct{ Use []struct{ DiskPath string } }
	require.NoError(t, json.Unmarshal(out, &work))
	var mods []module
	for _, u := range work.Use {
		dir := filepath.Clean(u.DiskPath)
		out, err := goCmd(filepath.Join(rootDir, dir), nil, "mod", "edit", "-json").Output()
		require.NoError(t, err, "go mod edit -json in %s", dir)
		var mf struct {
			Module  struct{ Path string }
			Go      string
			Require []struct{ Path, Version string }
		}
		require.NoError(t, json.Unmarshal(out, &mf))
		m := module{Path: mf.Module.Path, Dir: dir, Go: mf.Go, Requires: map[string]string{}}
		for _, r := range mf.Require {
			m.Requires[r.Path] = r.Version
		}
		mods = append(mods, m)
	}
	return mods
}

func byPath(t *testing.T, mods []module, p string) module {
	t.Helper()
	for _, m := range mods {
		if m.Path == p {
			return m
		}
	}
	t.Fatalf("no module %s in go.work", p)
	return module{}
}

const core = "github.com/fusebox-go/fusebox"

// gitEnv keeps the user's git configuration (a signing key, hooks) out of
// the commits and tags the tests make, and names their author.
var gitEnv = []string{
	"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1",
	"GIT_AUTHOR_NAME=fusebox test", "GIT_AUTHOR_EMAIL=test@fusebox.invalid",
	"GIT_COMMITTER_NAME=fusebox test", "GIT_COMMITTER_EMAIL=test@fusebox.invalid",
}

// git runs git in dir and returns its output; it fails the test on an error.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gitEnv...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// repoFiles returns the files of the repository, as git sees them: tracked
// and untracked ones that are not ignored, relative to the root, with
// slashes. It skips the test without git.
func repoFiles(t *testing.T, rootDir string) []string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("skipping: %v: the test takes the repository's files from git", err)
	}
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = rootDir
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("skipping: %s is not a git work tree (git ls-files: %v)", rootDir, err)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			continue
		}
		if fi, err := os.Lstat(filepath.Join(rootDir, f)); err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a symlink, which no module zip holds
		}
		files = append(files, f)
	}
	sort.Strings(files)
	return files
}

// copyRepo copies the repository's files (its work tree, changes included)
// into a new git repository with one commit, and returns its folder.
func copyRepo(t *testing.T) string {
	t.Helper()
	from := root(t)
	files := repoFiles(t, from)
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skipf("skipping: %v: scripts/release.sh is a bash script", err)
	}
	to := filepath.Join(t.TempDir(), "repo")
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(from, f))
		require.NoError(t, err)
		fi, err := os.Stat(filepath.Join(from, f))
		require.NoError(t, err)
		dst := filepath.Join(to, filepath.FromSlash(f))
		require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
		require.NoError(t, os.WriteFile(dst, data, fi.Mode().Perm()))
	}
	git(t, to, "init", "-q")
	git(t, to, "add", "-A")
	git(t, to, "commit", "-q", "-m", "the work tree")
	return to
}

// release runs scripts/release.sh with args in the repository at dir and
// returns its output and exit code.
func release(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"scripts/release.sh"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append(gitEnv, "GOWORK=")...)
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "scripts/release.sh %s:\n%s", strings.Join(args, " "), out)
		code = exit.ExitCode()
	}
	return string(out), code
}

package outside_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tagOf is the tag of module m's release at version: the core's is the
// version, a nested module's its folder and the version.
func tagOf(m module, version string) string {
	if m.Dir == "." {
		return version
	}
	return m.Dir + "/" + version
}

// TestRelease runs scripts/release.sh in a copy of the repository: it
// refuses a dirty tree and a bad version; a dry run changes nothing and
// lists every module's tag, each after the tags of the modules it
// requires; a release moves every require line between fusebox modules
// and go.work's replacements to the new version, commits, tags, and
// leaves a tree that resolves; and a tag is never made twice.
func TestRelease(t *testing.T) {
	repo := copyRepo(t)
	const version = "v0.42.0"
	before := modules(t, repo)
	head := git(t, repo, "rev-parse", "HEAD")

	out, code := release(t, repo, "0.42")
	assert.Equal(t, 2, code, "a version without its v:\n%s", out)
	out, code = release(t, repo, "v2.0.0")
	assert.Equal(t, 2, code, "v2 needs /v2 module paths:\n%s", out)

	require.NoError(t, os.WriteFile(filepath.Join(repo, "stray.txt"), []byte("x"), 0o644))
	out, code = release(t, repo, version)
	assert.Equal(t, 1, code, "a dirty tree:\n%s", out)
	assert.Contains(t, out, "stray.txt", "the refusal names what is dirty")
	require.NoError(t, os.Remove(filepath.Join(repo, "stray.txt")))

	out, code = release(t, repo, "-n", version)
	require.Equal(t, 0, code, "dry run:\n%s", out)
	assert.Empty(t, git(t, repo, "status", "--porcelain"), "a dry run changes no file")
	assert.Empty(t, git(t, repo, "tag"), "a dry run makes no tag")
	assert.Equal(t, head, git(t, repo, "rev-parse", "HEAD"), "a dry run makes no commit")
	position := map[string]int{}
	for i, tag := range tagsIn(out) {
		position[tag] = i
	}
	require.Len(t, position, len(before), "a tag per module:\n%s", out)
	for _, m := range before {
		require.Contains(t, position, tagOf(m, version), "the tag of %s", m.Path)
		for p := range m.Requires {
			if p == core || strings.HasPrefix(p, core+"/") {
				assert.Less(t, position[tagOf(byPath(t, before, p), version)], position[tagOf(m, version)],
					"%s is tagged after %s, which it requires", m.Path, p)
			}
		}
	}

	out, code = release(t, repo, version)
	require.Equal(t, 0, code, "release:\n%s", out)
	assert.Empty(t, git(t, repo, "status", "--porcelain"), "the release is committed")
	assert.Equal(t, "release "+version+"\n", git(t, repo, "log", "-1", "--format=%s"))
	var tags []string
	for _, m := range before {
		tags = append(tags, tagOf(m, version))
		assert.Equal(t, git(t, repo, "rev-parse", "HEAD"), git(t, repo, "rev-parse", tagOf(m, version)+"^{commit}"),
			"%s tags the release commit", tagOf(m, version))
	}
	assert.Contains(t, out, "git push origin HEAD "+strings.Join(tagsIn(out), " "), "it says how to publish")
	for _, m := range modules(t, repo) {
		for p, v := range m.Requires {
			if p == core || strings.HasPrefix(p, core+"/") {
				assert.Equal(t, version, v, "%s requires %s", m.Path, p)
			}
		}
	}
	work, err := os.ReadFile(filepath.Join(repo, "go.work"))
	require.NoError(t, err)
	for _, m := range before {
		assert.Regexp(t, `(?m)^\s*`+regexp.QuoteMeta(m.Path+" "+version+" => ")+`\./`, string(work),
			"go.work replaces %s of %s by its folder", version, m.Path)
	}
	old := byPath(t, before, core+"/store/redisstore").Requires[core]
	assert.NotContains(t, string(work), " "+old+" ", "no replacement of the version before, %s, is left", old)
	changelog, err := os.ReadFile(filepath.Join(repo, "CHANGELOG.md"))
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^## `+regexp.QuoteMeta(version)+` \(\d{4}-\d\d-\d\d\)$`, string(changelog))
	assert.NotContains(t, string(changelog), "## Unreleased")
	assert.ElementsMatch(t, tags, strings.Fields(git(t, repo, "tag")))

	out, code = release(t, repo, version)
	assert.Equal(t, 1, code, "a second release of the same version:\n%s", out)
	assert.Contains(t, out, "already exists")
}

// tagsIn returns the tags a release's output says it makes, in order.
func tagsIn(out string) []string {
	var tags []string
	for _, m := range regexp.MustCompile(`(?m)^\+ git tag -a (\S+) `).FindAllStringSubmatch(out, -1) {
		tags = append(tags, m[1])
	}
	return tags
}

package bench_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The migration guides quote the examples of this package: every Go block
// of theirs must be found, line for line, in one of the files they quote,
// so that no snippet goes stale unnoticed.
func TestGuideSnippets(t *testing.T) {
	// The failsafe-go guide quotes the subscription of the gobreaker
	// example, which both examples share.
	guides := map[string][]string{
		"from-gobreaker.md":   {"from_gobreaker_test.go"},
		"from-failsafe-go.md": {"from_failsafe_test.go", "from_gobreaker_test.go"},
	}
	block := regexp.MustCompile("(?s)```go\n(.*?)```")
	for guide, sources := range guides {
		doc, err := os.ReadFile(filepath.Join("..", "docs", guide))
		if err != nil {
			t.Fatal(err)
		}
		var src string
		for _, f := range sources {
			code, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src += normalize(string(code))
		}
		blocks := block.FindAllStringSubmatch(string(doc), -1)
		if len(blocks) == 0 {
			t.Errorf("docs/%s: no Go block", guide)
		}
		for _, b := range blocks {
			if !strings.Contains(src, normalize(b[1])) {
				t.Errorf("docs/%s: a Go block is not in %s:\n%s", guide, strings.Join(sources, " or "), b[1])
			}
		}
	}
}

// normalize drops indentation and blank lines, so that a snippet matches
// the code it was copied from at whatever depth it sits there.
func normalize(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return "\n" + strings.Join(out, "\n") + "\n"
}

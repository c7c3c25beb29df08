package guides_test

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/fusebox-go/fusebox/manager"
)

// guides are the files whose Go code blocks must be found in code that
// compiles: these tests, the examples they quote, or the library's source.
var guides = []string{
	"../../README.md",
	"../../docs/architecture.md",
	"../../docs/getting-started.md",
	"../../docs/recover.md",
	"../../docs/testing.md",
}

var sources = []string{
	"*_test.go",
	"../customrecover/*.go",
	"../quickstart/*.go",
	"../../recover/*.go",
}

var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// normalize drops indentation and blank lines, so that a snippet matches the
// code it was copied from at whatever depth it sits there.
func normalize(s string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return "\n" + strings.Join(out, "\n") + "\n"
}

// TestSnippets checks that every Go block of the guides appears, line for
// line, in a file that is compiled and tested, so that no snippet goes
// stale unnoticed.
func TestSnippets(t *testing.T) {
	var code []string
	for _, pattern := range sources {
		files, err := filepath.Glob(pattern)
		if err != nil || len(files) == 0 {
			t.Fatalf("no source files match %s (%v)", pattern, err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			code = append(code, normalize(string(b)))
		}
	}
	for _, guide := range guides {
		b, err := os.ReadFile(guide)
		if err != nil {
			t.Fatal(err)
		}
		blocks := goBlock.FindAllStringSubmatch(string(b), -1)
		if len(blocks) == 0 && !strings.HasSuffix(guide, "architecture.md") {
			t.Errorf("%s: no Go block found", guide)
		}
		for _, m := range blocks {
			want := normalize(m[1])
			found := false
			for _, c := range code {
				if strings.Contains(c, want) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s: this block is in no compiled file:\n%s", guide, m[1])
			}
		}
	}
}

// TestConfigTable checks that the table of docs/getting-started.md, which
// says it lists every field of manager.Config, has a row for each.
func TestConfigTable(t *testing.T) {
	raw, err := os.ReadFile("../../docs/getting-started.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	if !strings.Contains(text, "Every field of `manager.Config` may be left out:") {
		t.Fatal("getting-started.md no longer introduces its table of manager.Config's fields")
	}
	typ := reflect.TypeFor[manager.Config]()
	for i := range typ.NumField() {
		if f := typ.Field(i); f.IsExported() && !strings.Contains(text, "\n| `"+f.Name+"` |") {
			t.Errorf("getting-started.md's table of manager.Config has no row for %s", f.Name)
		}
	}
}

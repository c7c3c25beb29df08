package manager_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The seed corpora of FuzzBreakerModel and FuzzSharedModel are files in
// the format go test reads from testdata/fuzz/<target>: one []byte value,
// as go test itself writes an input a fuzzer found. Both targets keep
// theirs from seed scripts in the test (fuzzSeeds, sharedSeeds) through
// seedCorpus, and read every file there, a fuzzer's find too, with
// parseCorpusFile.

// corpusHeader is the first line of a corpus file.
const corpusHeader = "go test fuzz v1"

// corpusFile is data as a corpus file.
func corpusFile(data []byte) []byte {
	return fmt.Appendf(nil, "%s\n[]byte(%s)\n", corpusHeader, strconv.Quote(string(data)))
}

// parseCorpusFile reads a corpus file of one []byte value.
func parseCorpusFile(b []byte) ([]byte, error) {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[0] != corpusHeader {
		return nil, fmt.Errorf("not a one-value corpus file")
	}
	v, ok := strings.CutPrefix(lines[1], "[]byte(")
	if !ok || !strings.HasSuffix(v, ")") {
		return nil, fmt.Errorf("not a []byte value: %q", lines[1])
	}
	s, err := strconv.Unquote(strings.TrimSuffix(v, ")"))
	return []byte(s), err
}

// corpusInput is one input of a seed corpus, named as its file is.
type corpusInput struct {
	name string
	data []byte
}

// scriptSeed is a seed script of a fuzz target whose operations are O: a
// header of four bytes, then the operations.
type scriptSeed[O any] struct {
	name   string
	header [4]byte
	ops    []O
}

// encodeSeeds encodes each seed with encode, the target's encoding.
func encodeSeeds[O any](seeds []scriptSeed[O], encode func([4]byte, []O) []byte) []corpusInput {
	out := make([]corpusInput, 0, len(seeds))
	for _, s := range seeds {
		out = append(out, corpusInput{s.name, encode(s.header, s.ops)})
	}
	return out
}

// seedCorpus keeps dir, a target's seed corpus, equal to seeds, one file a
// seed named after it: with update it writes them first; otherwise a seed
// whose file is missing or differs fails the test, which names the flag
// (-fusebox.<updateFlag>) that rewrites them. It returns every input in
// dir, the seeds' and any other file's (a fuzzer's find kept as a
// regression), in the order of their names.
func seedCorpus(t *testing.T, dir string, seeds []corpusInput, update bool, updateFlag string) []corpusInput {
	t.Helper()
	if update {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for _, s := range seeds {
			require.NoError(t, os.WriteFile(filepath.Join(dir, s.name), corpusFile(s.data), 0o644))
		}
	}
	for _, s := range seeds {
		b, err := os.ReadFile(filepath.Join(dir, s.name))
		require.NoError(t, err, "seed %s (go test ./manager -run '^%s$' -fusebox.%s writes it)", s.name, t.Name(), updateFlag)
		assert.True(t, bytes.Equal(b, corpusFile(s.data)), "seed %s is out of date (go test ./manager -run '^%s$' -fusebox.%s rewrites it)", s.name, t.Name(), updateFlag)
	}

	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	var all []corpusInput
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f.Name()))
		require.NoError(t, err)
		data, err := parseCorpusFile(b)
		require.NoError(t, err, "corpus file %s", f.Name())
		all = append(all, corpusInput{f.Name(), data})
	}
	return all
}

// edgesTaken fails the test for each edge in want that no input of a
// corpus took, and returns the edges taken, with how many times, one a
// line in order, for the test's log.
func edgesTaken[E comparable](t *testing.T, taken map[E]int, want []E) string {
	t.Helper()
	for _, e := range want {
		assert.Positive(t, taken[e], "no seed takes %v", e)
	}
	var lines []string
	for e, n := range taken {
		lines = append(lines, fmt.Sprintf("%v: %d", e, n))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

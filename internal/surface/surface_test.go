package surface_test

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// core are the packages whose names are counted, by folder from the
// repository's root.
var core = []string{"manager", "breaker", "store", "recover", "classify"}

// maxNames is the most names the core may export. Lower it as names go
// internal; raise it only with a commit that says which names a user
// needs and why. 151: the 145 of the last cut, less five of store that
// went internal (OneLine, MaxWhy, ReasonOf, Policy.Bucket,
// Policy.Reached), plus the contract's Group (Manager.Group,
// GroupOptions, Group, Group.Get, Group.Len) and Breaker.HalfOpen, and
// what using them needs: ErrGroupFull (to tell a full group from a bad
// key), breaker.CauseHalfOpen (the cause events and Stats show),
// EventQuorumShort (the warning's event kind), store.HalfOpener and
// Memory.HalfOpen (a store that half-opens for the fleet).
const maxNames = 151

// names returns the names package dir exports, as package doc.go defines
// them: "Name" for a package-level identifier, "Type.Method" for a method.
func names(t *testing.T, dir string) []string {
	t.Helper()
	pkg, err := build.Default.ImportDir(dir, 0)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	fset := token.NewFileSet()
	var out []string
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					out = append(out, d.Name.Name)
					continue
				}
				if recv := receiver(d.Recv.List[0].Type); ast.IsExported(recv) {
					out = append(out, recv+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							out = append(out, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								out = append(out, n.Name)
							}
						}
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// receiver returns the name of a method's receiver type: T of T, *T,
// T[P] and *T[P].
func receiver(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// The core exports at most maxNames names.
func TestSurface(t *testing.T) {
	total := 0
	for _, p := range core {
		ns := names(t, filepath.Join("..", "..", p))
		total += len(ns)
		t.Logf("%s: %d\n\t%s", p, len(ns), strings.Join(ns, "\n\t"))
	}
	t.Logf("core: %d names (limit %d)", total, maxNames)
	if total > maxNames {
		t.Errorf("the core packages export %d names, more than %d: move what only the module uses to internal/ (go test ./internal/surface -run TestSurface -v lists them)", total, maxNames)
	}
}

// The count is of what the package doc says: a fixture with each kind of
// declaration counts only the exported package-level names and the
// exported methods of exported types.
func TestNamesDefinition(t *testing.T) {
	dir := t.TempDir()
	src := `package fixture

const A, b = 1, 2
var V, w int
type T struct{ Field int; hidden int }
type u struct{ Field int }
type I interface{ Method() }
type G[P any] struct{}
func F() {}
func f() {}
func (T) M() {}
func (*T) N() {}
func (T) m() {}
func (u) M() {}
func (G[P]) M() {}
`
	writeFile(t, filepath.Join(dir, "fixture.go"), src)
	writeFile(t, filepath.Join(dir, "fixture_test.go"), "package fixture\n\nfunc Test() {}\n")
	want := []string{"A", "F", "G", "G.M", "I", "T", "T.M", "T.N", "V"}
	if got := names(t, dir); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("names of the fixture: %v, want %v", got, want)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

package archtest

import (
	"go/build"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is the library's import path; the bench module lives under it
// (module + "/bench").
const module = "github.com/sluicehq/sluice"

// core are the packages that import only the standard library and the core
// packages listed for them: the arrows of docs/architecture.md. A key names
// a package and every package below it (sim/x belongs to sim), so a core
// package may be split without touching this table; a package may always
// import the packages of its own family. retry is the client-side retry
// discipline (throttle, budget, backoff).
var core = map[string][]string{
	"clock":     nil,
	"metrics":   nil,
	"adaptive":  {"clock", "metrics"},
	"vegas":     {"adaptive", "clock"},
	"gradient":  {"adaptive", "clock"},
	"ratelimit": {"clock", "metrics"},
	"retry":     {"clock"},
	"shed":      {"adaptive", "clock", "metrics", "retry"},
	"sim":       {"adaptive", "clock", "gradient", "metrics", "ratelimit", "retry", "shed", "vegas"},
}

// leaves are packages of the module that are not core and may import
// anything the rules below allow (third-party modules among it); they are
// listed so that a new package has to be placed on the picture.
var leaves = []string{
	"ratelimit/redisstore", // go-redis
	"interceptors",         // grpc-go, httpsfv
	"metrics/prom",         // an exporter: Prometheus
	"metrics/gometrics",    // an exporter: go-metrics
	"metrics/internal",     // the exporters' shared helpers
	"cmd",                  // the CLI
	"examples",
	"bench", // its own module
}

// testSupport are packages that only tests (and bench) import.
var testSupport = []string{
	"internal/archtest",
	"internal/observertest",
	"internal/readme",
	"internal/redistest",
	"ratelimit/ratelimittest",
}

// pkg is one package of the repository: its path relative to the module
// and its non-test imports.
type pkg struct {
	rel     string
	name    string
	doc     string
	imports []string
}

// under reports whether rel is prefix or a package below it.
func under(rel, prefix string) bool {
	return rel == prefix || strings.HasPrefix(rel, prefix+"/")
}

// family returns the key of core or the entry of list that rel belongs to,
// or "".
func family(rel string, list []string) string {
	best := ""
	for _, p := range list {
		if under(rel, p) && len(p) > len(best) {
			best = p
		}
	}
	return best
}

func coreFamily(rel string) string {
	keys := make([]string, 0, len(core))
	for k := range core {
		keys = append(keys, k)
	}
	f := family(rel, keys)
	if f != "" && family(rel, leaves) != "" && len(family(rel, leaves)) > len(f) {
		return "" // ratelimit/redisstore is a leaf below a core package
	}
	if f != "" && family(rel, testSupport) != "" {
		return ""
	}
	return f
}

// coreAllows reports whether core package from may import to: a package
// of its own family or of one drawn for it.
func coreAllows(from, to string) bool {
	fam, toFam := coreFamily(from), coreFamily(to)
	return toFam == fam || slices.Contains(core[fam], toFam)
}

// packages reads every package of the repository (both modules) from its
// source, without building it: go/build's ImportDir, so the test needs no
// network and no go command.
func packages(t *testing.T) []pkg {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !strings.Contains(string(b), "module "+module+"\n") {
		t.Fatalf("%s is not the root of %s: %v", root, module, err)
	}
	var out []pkg
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") || n == "testdata") {
			return filepath.SkipDir
		}
		bp, err := build.ImportDir(p, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, pkg{rel: filepath.ToSlash(rel), name: bp.Name, doc: bp.Doc, imports: bp.Imports})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 20 {
		t.Fatalf("found %d packages; the walk is broken", len(out))
	}
	return out
}

// local returns the import path relative to the module for a path of the
// repository, or "" for the standard library and other modules.
func local(imp string) string {
	if imp == module {
		return "."
	}
	if rest, ok := strings.CutPrefix(imp, module+"/"); ok {
		return rest
	}
	return ""
}

// stdlib reports whether imp is in the standard library: its first element
// has no dot.
func stdlib(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

// TestArrows checks the rules of docs/architecture.md on every package's
// non-test imports:
//   - a core package imports only the standard library and the core
//     packages drawn for it (its own family too);
//   - the algorithms (vegas, gradient) never import each other;
//   - an exporter (metrics/...) imports only metrics and metrics/internal,
//     never a guard;
//   - nothing imports cmd or bench (bench may import itself);
//   - only tests, test-support packages and bench import a test-support
//     package;
//   - every package is on the picture: core, leaf or test support.
func TestArrows(t *testing.T) {
	for _, p := range packages(t) {
		fam := coreFamily(p.rel)
		if fam == "" && family(p.rel, leaves) == "" && family(p.rel, testSupport) == "" {
			t.Errorf("%s is not on the picture: add it to core, leaves or testSupport here and to docs/architecture.md", p.rel)
		}
		for _, imp := range p.imports {
			to := local(imp)
			switch {
			case to == "" && stdlib(imp):
				continue
			case to == "" && fam != "":
				t.Errorf("core package %s imports %s, outside the standard library", p.rel, imp)
				continue
			case to == "":
				continue // a leaf's third-party import
			}
			if fam != "" && !coreAllows(p.rel, to) {
				t.Errorf("core package %s imports %s: not an arrow of docs/architecture.md", p.rel, to)
			}
			if (under(p.rel, "vegas") && under(to, "gradient")) || (under(p.rel, "gradient") && under(to, "vegas")) {
				t.Errorf("algorithm %s imports algorithm %s", p.rel, to)
			}
			if under(p.rel, "metrics") && p.rel != "metrics" && to != "metrics" && !under(to, "metrics/internal") {
				t.Errorf("exporter %s imports %s: an exporter never reaches into a guard, it reads one through metrics' interfaces", p.rel, to)
			}
			if under(to, "cmd") || (under(to, "bench") && !under(p.rel, "bench")) {
				t.Errorf("%s imports %s: nothing imports cmd or bench", p.rel, to)
			}
			if family(to, testSupport) != "" && family(p.rel, testSupport) == "" && !under(p.rel, "bench") {
				t.Errorf("%s imports test-support package %s outside a test", p.rel, to)
			}
		}
	}
}

// TestPackageDocs checks that every package has a doc comment: the one job
// it does, in its first sentence.
func TestPackageDocs(t *testing.T) {
	for _, p := range packages(t) {
		if strings.TrimSpace(p.doc) == "" {
			t.Errorf("package %s (%s) has no doc comment", path.Base(p.rel), p.rel)
		}
	}
}

// The rules above must reject what they are meant to: a table of imports
// that breaks each one.
func TestArrowsCatchViolations(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		allowed  bool
	}{
		{"adaptive", "clock", true},
		{"adaptive", "shed", false},
		{"vegas", "gradient", false},
		{"gradient", "vegas", false},
		{"shed", "retry", true},
		{"retry", "clock", true},
		{"retry", "adaptive", false},
		{"sim", "retry", true},
		{"sim/engine", "sim/models", true},
		{"clock", "metrics", false},
		{"metrics", "adaptive", false},
		{"ratelimit", "adaptive", false},
	} {
		if got := coreAllows(tc.from, tc.to); got != tc.allowed {
			t.Errorf("%s -> %s allowed = %v, want %v", tc.from, tc.to, got, tc.allowed)
		}
	}
	if coreFamily("ratelimit/redisstore") != "" || coreFamily("ratelimit/ratelimittest") != "" {
		t.Error("a leaf or test-support package below a core package counted as core")
	}
}

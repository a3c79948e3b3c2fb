package readme

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goBlocks returns the ```go blocks of a markdown text.
func goBlocks(md string) []string {
	re := regexp.MustCompile("(?ms)^```go\n(.*?)^```")
	var out []string
	for _, m := range re.FindAllStringSubmatch(md, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestGoBlocks(t *testing.T) {
	md := "text\n```go\npackage a\n```\n```sh\nls\n```\n```go\npackage b\n```\n"
	if got := goBlocks(md); len(got) != 2 || got[0] != "package a\n" || got[1] != "package b\n" {
		t.Errorf("goBlocks = %q", got)
	}
}

// The README's quick start is the program in examples/quickstart, so what
// a reader pastes is what the repository builds and vets.
func TestREADMEQuickStartIsTheExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../examples/quickstart/main.go")
	if err != nil {
		t.Fatal(err)
	}
	body := string(example[bytes.Index(example, []byte("package main")):])
	blocks := goBlocks(string(readme))
	if len(blocks) == 0 || blocks[0] != body {
		t.Errorf("the README's first Go block is not examples/quickstart/main.go (from its package clause on)")
	}
}

// Every Go block of the README is a whole program; each is built in a
// scratch module whose replace directive points at this repository, with
// the repository's dependency versions, as a reader who pastes it would.
func TestREADMESnippetsBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs with the go command")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(readme))
	if len(blocks) < 2 {
		t.Fatalf("found %d Go blocks in the README, want the quick start and the Redis one at least", len(blocks))
	}
	gomod, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	gosum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The scratch module requires sluice and, at the repository's versions,
	// everything sluice requires: the build needs no network.
	reqs := regexp.MustCompile(`(?ms)^require \((.*?)^\)`).FindAllSubmatch(gomod, -1)
	var mod strings.Builder
	fmt.Fprintf(&mod, "module scratch\n\ngo 1.26.0\n\nrequire github.com/sluicehq/sluice v0.0.0\n\nreplace github.com/sluicehq/sluice => %s\n", repo)
	for _, r := range reqs {
		fmt.Fprintf(&mod, "\nrequire (%s)\n", r[1])
	}
	files := map[string][]byte{"go.mod": []byte(mod.String()), "go.sum": gosum}
	for i, b := range blocks {
		if !strings.HasPrefix(b, "package main\n") {
			t.Errorf("README Go block %d is not a whole program (package main): a reader could not run it", i+1)
			continue
		}
		files[filepath.Join(fmt.Sprintf("snippet%d", i+1), "main.go")] = []byte(b)
	}
	for name, b := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"build", "-o", os.DevNull, "./..."}, {"vet", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOPROXY=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go %s on the README's Go blocks: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

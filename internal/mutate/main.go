// Command mutate runs the mutation canaries in mutations/: each canary is a
// small, named change to the production code that breaks one guarantee the
// README promises, together with the tests expected to catch it. mutate
// copies the checkout into a scratch directory, applies one canary, checks
// that the result still builds, runs only the named tests, and counts the
// canary as killed when they fail. A canary that survives (its tests pass)
// or no longer applies (the code it names moved) fails the run.
//
// Usage (from the repository root):
//
//	go run ./internal/mutate [-list] [-timeout 5m] [NAME ...]
//
// A canary file, mutations/NAME.mut:
//
//	# guarantee: DISPATCHED is appended with compare-and-set
//	# tests: ./ledger/jetstream -run '^TestAppendIsCompareAndSet$'
//	@@ ledger/jetstream/committer.go
//	<<<<
//	the exact lines to replace (they must occur exactly once)
//	====
//	the lines that replace them
//	>>>>
//
// Several @@ blocks may follow each other. The tests line is split like a
// shell would split it (single and double quotes) and passed to go test
// after -count=1.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Limits of one run.
const (
	defaultTimeout = 5 * time.Minute // per canary: build plus the named tests
	maxCanaryBytes = 64 << 10
)

// Canary is one named mutation.
type Canary struct {
	Name      string
	Guarantee string
	Tests     []string // go test arguments after -count=1
	Edits     []Edit
}

// Edit replaces Old by New in File; Old must occur exactly once.
type Edit struct {
	File     string
	Old, New string
}

func main() {
	list := flag.Bool("list", false, "list the canaries and exit")
	timeout := flag.Duration("timeout", defaultTimeout, "time allowed for one canary (build and tests)")
	dir := flag.String("dir", "mutations", "directory holding the *.mut canaries")
	flag.Parse()
	canaries, err := load(*dir, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	if *list {
		for _, c := range canaries {
			fmt.Printf("%-34s %s\n", c.Name, c.Guarantee)
		}
		return
	}
	failed := 0
	for _, c := range canaries {
		start := time.Now()
		verdict, detail := run(c, *timeout)
		fmt.Printf("%-8s %-34s %5.1fs  %s\n", verdict, c.Name, time.Since(start).Seconds(), c.Guarantee)
		if verdict != "killed" {
			failed++
			fmt.Println(indent(detail))
		}
	}
	fmt.Printf("%d canaries, %d killed, %d failed\n", len(canaries), len(canaries)-failed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

// run applies c in a scratch copy of the checkout and runs its tests.
// Verdicts: killed (the tests failed, as they must), survived, invalid
// (does not apply or does not build).
func run(c Canary, timeout time.Duration) (verdict, detail string) {
	scratch, err := os.MkdirTemp("", "portcullis-mutant-")
	if err != nil {
		return "invalid", err.Error()
	}
	defer os.RemoveAll(scratch)
	if err := copyCheckout(scratch); err != nil {
		return "invalid", "copy checkout: " + err.Error()
	}
	if err := apply(scratch, c); err != nil {
		return "invalid", err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// Only the mutated packages are built here (no binaries linked); the
	// test run builds what the named tests need, and a mutant they cannot
	// build is invalid, not killed.
	// A package of a module nested in the checkout (third_party/) is
	// built from that module's directory.
	builds := map[string][]string{}
	for _, dir := range editedDirs(c) {
		mod := moduleDir(scratch, dir)
		rel, err := filepath.Rel(mod, dir)
		if err != nil {
			return "invalid", err.Error()
		}
		builds[mod] = append(builds[mod], "./"+filepath.ToSlash(rel))
	}
	for mod, pkgs := range builds {
		if out, err := command(ctx, filepath.Join(scratch, mod), "go", append([]string{"build"}, pkgs...)...); err != nil {
			return "invalid", "the mutant does not build:\n" + tail(out)
		}
	}
	args := append([]string{"test", "-count=1"}, c.Tests...)
	out, err := command(ctx, scratch, "go", args...)
	switch {
	case ctx.Err() != nil:
		return "invalid", fmt.Sprintf("timed out after %s:\n%s", timeout, tail(out))
	case bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]")):
		return "invalid", "the named tests do not build against the mutant:\n" + tail(out)
	case err == nil:
		return "survived", "go " + strings.Join(args, " ") + " passed with the mutation applied:\n" + tail(out)
	case bytes.Contains(out, []byte("no test files")) || bytes.Contains(out, []byte("testing: warning: no tests to run")):
		return "invalid", "the named tests do not exist:\n" + tail(out)
	}
	return "killed", ""
}

// editedDirs are the package directories c changes, each once.
func editedDirs(c Canary) []string {
	seen := map[string]bool{}
	var dirs []string
	for _, e := range c.Edits {
		d := filepath.ToSlash(filepath.Dir(e.File))
		if !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// moduleDir is the directory (relative to root, "." for the checkout's
// own module) of the module holding the package directory dir.
func moduleDir(root, dir string) string {
	for d := dir; d != "." && d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(root, d, "go.mod")); err == nil {
			return d
		}
	}
	return "."
}

func command(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	// -trimpath keeps the scratch directory out of the build cache's keys,
	// so the packages a canary does not touch are not compiled again.
	cmd.Env = append(os.Environ(), "PORTCULLIS_MUTANT=1", "GOFLAGS=-trimpath "+os.Getenv("GOFLAGS"))
	return cmd.CombinedOutput()
}

// copyCheckout copies the tracked and untracked-but-not-ignored files.
func copyCheckout(dst string) error {
	out, err := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		if err := copyFile(name, filepath.Join(dst, name)); err != nil {
			return err
		}
	}
	// Installed test dependencies (the TypeScript client) are ignored by git
	// but needed by the tests: link them.
	if fi, err := os.Stat("test/ts/node_modules"); err == nil && fi.IsDir() {
		abs, _ := filepath.Abs("test/ts/node_modules")
		if err := os.Symlink(abs, filepath.Join(dst, "test/ts/node_modules")); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	fi, err := os.Lstat(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil // deleted in the work tree
	}
	if err != nil || !fi.Mode().IsRegular() {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func apply(root string, c Canary) error {
	for _, e := range c.Edits {
		path := filepath.Join(root, e.File)
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("%s: %w", e.File, err)
		}
		if n := bytes.Count(b, []byte(e.Old)); n != 1 {
			return fmt.Errorf("%s: the text to replace occurs %d times (want exactly 1); the canary is stale:\n%s", e.File, n, indent(e.Old))
		}
		b = bytes.Replace(b, []byte(e.Old), []byte(e.New), 1)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// load reads every canary in dir, or only the named ones.
func load(dir string, names []string) ([]Canary, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.mut"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []Canary
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".mut")
		if len(names) > 0 && !want[name] {
			continue // not asked for (names, once all found, must not select the rest)
		}
		delete(want, name)
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		if len(b) > maxCanaryBytes {
			return nil, fmt.Errorf("%s: larger than %d bytes", p, maxCanaryBytes)
		}
		c, err := Parse(name, string(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, c)
	}
	for n := range want {
		return nil, fmt.Errorf("no canary named %q in %s", n, dir)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no canaries in %s", dir)
	}
	return out, nil
}

// Parse reads one canary's text.
func Parse(name, text string) (Canary, error) {
	c := Canary{Name: name}
	lines := strings.SplitAfter(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], "\n")
		switch {
		case strings.HasPrefix(line, "# guarantee:"):
			c.Guarantee = strings.TrimSpace(strings.TrimPrefix(line, "# guarantee:"))
		case strings.HasPrefix(line, "# tests:"):
			args, err := splitArgs(strings.TrimPrefix(line, "# tests:"))
			if err != nil {
				return c, fmt.Errorf("line %d: %w", i+1, err)
			}
			c.Tests = args
		case strings.HasPrefix(line, "#"), strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, "@@ "):
			e := Edit{File: strings.TrimSpace(strings.TrimPrefix(line, "@@ "))}
			var err error
			if i, err = block(lines, i+1, &e); err != nil {
				return c, err
			}
			c.Edits = append(c.Edits, e)
		default:
			return c, fmt.Errorf("line %d: unexpected %q (want # guarantee:, # tests: or @@ FILE)", i+1, line)
		}
	}
	switch {
	case c.Guarantee == "":
		return c, errors.New("no '# guarantee:' line")
	case len(c.Tests) == 0:
		return c, errors.New("no '# tests:' line")
	case len(c.Edits) == 0:
		return c, errors.New("no @@ edit")
	}
	return c, nil
}

// block reads "<<<<\nold====\nnew>>>>\n" starting at lines[i]; it returns
// the index of the closing line.
func block(lines []string, i int, e *Edit) (int, error) {
	if i >= len(lines) || strings.TrimRight(lines[i], "\n") != "<<<<" {
		return i, fmt.Errorf("line %d: want <<<< after @@ %s", i+1, e.File)
	}
	var old, nw strings.Builder
	cur := &old
	for i++; i < len(lines); i++ {
		switch strings.TrimRight(lines[i], "\n") {
		case "====":
			if cur == &nw {
				return i, fmt.Errorf("line %d: a second ====", i+1)
			}
			cur = &nw
			continue
		case ">>>>":
			if cur != &nw {
				return i, fmt.Errorf("line %d: >>>> before ====", i+1)
			}
			e.Old, e.New = old.String(), nw.String()
			if e.Old == "" {
				return i, fmt.Errorf("line %d: nothing to replace", i+1)
			}
			return i, nil
		}
		cur.WriteString(lines[i])
	}
	return i, fmt.Errorf("@@ %s: no closing >>>>", e.File)
}

// splitArgs splits s like a shell: spaces separate, quotes group.
func splitArgs(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	var quote rune
	in := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unclosed quote")
	}
	if in {
		out = append(out, cur.String())
	}
	return out, nil
}

func tail(b []byte) string {
	const max = 3000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

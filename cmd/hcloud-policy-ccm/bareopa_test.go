package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// bareOpaHeading is the docs/policy.md section whose first code block TestDocBareOpa runs.
const bareOpaHeading = "### With bare `opa`"

// TestDocBareOpa runs the command block of docs/policy.md § With bare `opa` line by line, as an
// author would, in a temporary directory whose policies/ is a copy of the example policies
// without their inputs/ (an author's own directory): hcloud-policy-ccm lines run this binary's
// tools, opa lines run `go tool opa` (the OPA of go.mod). Every line must succeed, and the opa
// test line must run the tests and pass them: without the sample inputs written by `policy
// samples`, every test that starts from a sample fails. A line that is neither fails the test,
// so the block cannot grow a step that is not run.
func TestDocBareOpa(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	lines := docBlock(t, filepath.Join(root, "docs", "policy.md"), bareOpaHeading)
	opa := goToolPath(t, root, "opa")

	work := t.TempDir()
	copyTopLevel(t, filepath.Join(root, "examples", "policies"), filepath.Join(work, "policies"))
	t.Chdir(work)
	ranTests := false
	var samplesDir string
	var opaTest []string
	for _, line := range lines {
		cmdline, redirect, _ := strings.Cut(line, ">")
		args := strings.Fields(cmdline)
		var out bytes.Buffer
		switch args[0] {
		case "hcloud-policy-ccm":
			if i := slices.Index(args, "--out"); i >= 0 && i+1 < len(args) && args[2] == "samples" {
				samplesDir = args[i+1]
			}
			if err := runTool(newToolsCommand(), args[1:], &out); err != nil {
				t.Fatalf("%s: %v\n%s", line, err, out.String())
			}
		case "opa":
			cmd := exec.Command(opa, args[1:]...)
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s: %v\n%s", line, err, out.String())
			}
			if len(args) > 1 && args[1] == "test" {
				ranTests = strings.Contains(out.String(), "PASS: ")
				opaTest = args[1:]
			}
		default:
			t.Fatalf("docs/policy.md § %s: %q is neither hcloud-policy-ccm nor opa; teach TestDocBareOpa to run it", bareOpaHeading, line)
		}
		if f := strings.TrimSpace(redirect); f != "" {
			if err := os.WriteFile(f, out.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !ranTests || samplesDir == "" {
		t.Fatalf("docs/policy.md § %s has no `opa test` line that ran and passed tests, or no `policy samples --out DIR` line", bareOpaHeading)
	}
	// What the docs say of the samples: the same opa test without them fails.
	without := slices.DeleteFunc(slices.Clone(opaTest), func(a string) bool { return filepath.Clean(a) == filepath.Clean(samplesDir) })
	if out, err := exec.Command(opa, without...).CombinedOutput(); err == nil {
		t.Errorf("opa %s passes without the samples of %s; the docs say it fails:\n%s", strings.Join(without, " "), samplesDir, out)
	}
}

// docBlock returns the command lines (no blank lines, no comments) of the first code block
// after heading in the Markdown file.
func docBlock(t *testing.T, file, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no heading %q", file, heading)
	}
	var lines []string
	inCode := false
	sc := bufio.NewScanner(strings.NewReader(after))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "```") {
			if inCode {
				break
			}
			inCode = true
			continue
		}
		if inCode && line != "" && !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("%s § %s has no command block", file, heading)
	}
	return lines
}

// goToolPath returns the executable of a tool of the module at root (`go tool -n NAME`, which
// builds it if needed).
func goToolPath(t *testing.T, root, name string) string {
	t.Helper()
	cmd := exec.Command("go", "tool", "-n", name)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go tool -n %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

// copyTopLevel copies the regular files at the top of src to dst, as an author's own policy
// directory holds them (no inputs/ subdirectory).
func copyTopLevel(t *testing.T, src, dst string) {
	t.Helper()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

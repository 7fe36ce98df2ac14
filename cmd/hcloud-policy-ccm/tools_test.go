package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// TestToolHelp: each tool's help shows its own flags and none of the CCM's.
func TestToolHelp(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"policy", "eval", "--help"}, []string{"--policies", "--input", "--mode", "--failure-mode"}},
		{[]string{"policy", "test", "--help"}, []string{"-v, --verbose", "--coverage", "--threshold", "--explain", "flat"}},
		{[]string{"policy", "capabilities", "--help"}, []string{"opa check --strict --capabilities capabilities.json"}},
		{[]string{"policy", "--help"}, []string{"eval", "test", "capabilities", "samples", "schema"}},
		{[]string{"policy", "samples", "--help"}, []string{"--out", "opa test --capabilities capabilities.json policies/ policy-samples/"}},
		{[]string{"policy", "schema", "--help"}, []string{"opa check --strict --schema policy-input.schema.json"}},
		{[]string{"plugin", "run", "--help"}, []string{"--module", "--hook", "--input"}},
		{[]string{"help", "policy", "eval"}, []string{"--policies", "--input"}},
		{[]string{"plan", "--help"}, []string{"-f, --filename", "--policies", "--env-file", "--state", "-o, --output", "Exit status: 0 allowed, 1 denied, 2 bad input"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			if err := runTool(newToolsCommand(), tt.args, &out); err != nil {
				t.Fatal(err)
			}
			help := out.String()
			for _, w := range tt.want {
				if !strings.Contains(help, w) {
					t.Errorf("help lacks %q:\n%s", w, help)
				}
			}
			for _, ccmFlag := range []string{"--leader-elect", "--kubeconfig", "--cloud-provider", "--vmodule", "--version"} {
				if strings.Contains(help, ccmFlag) {
					t.Errorf("help shows the CCM's flag %s:\n%s", ccmFlag, help)
				}
			}
			if n := strings.Count(help, "\n"); n > 40 {
				t.Errorf("help has %d lines, want at most 40:\n%s", n, help)
			}
		})
	}
}

// TestRootHelpListsTools: the CCM's --help lists every tool, and the command line of a tool is
// routed to the tools, not to the CCM.
func TestRootHelpListsTools(t *testing.T) {
	cmd := newCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"policy test", "policy eval", "policy capabilities", "plugin run", "version", "--cloud-provider"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("the CCM's help lacks %q", w)
		}
	}
	tools := newToolsCommand()
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{[]string{"policy", "test", "x"}, true},
		{[]string{"version"}, true},
		{[]string{"help", "policy", "test"}, true},
		{[]string{"help"}, false},
		{[]string{"--cloud-provider=hcloud"}, false},
		{nil, false},
	} {
		if got := isTool(tools, tt.args); got != tt.want {
			t.Errorf("isTool(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
}

// docCommand is one command line shown in the docs.
type docCommand struct {
	where string // file:line
	args  []string
}

// docCommands returns the `hcloud-policy-ccm policy ...` lines of the code blocks of the
// given Markdown files, without comments and "> FILE" redirections (the output is checked
// instead of written).
func docCommands(t *testing.T, files ...string) []docCommand {
	t.Helper()
	var cmds []docCommand
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inCode := false
		sc := bufio.NewScanner(bytes.NewReader(b))
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if strings.HasPrefix(line, "```") {
				inCode = !inCode
				continue
			}
			isCmd := strings.HasPrefix(line, "hcloud-policy-ccm policy ") || strings.HasPrefix(line, "hcloud-policy-ccm plan ")
			if !inCode || !isCmd {
				continue
			}
			line, _, _ = strings.Cut(line, " #")
			c := docCommand{where: f + ":" + strconv.Itoa(n)}
			line, _, _ = strings.Cut(line, ">")
			c.args = strings.Fields(line)[1:]
			cmds = append(cmds, c)
		}
	}
	return cmds
}

// TestDocCommands runs every `hcloud-policy-ccm policy ...` and `hcloud-policy-ccm plan ...` command of docs/policy.md,
// README.md and examples/policies/README.md from the module root, so the docs cannot drift from the CLI. A command succeeds,
// or (policy eval, plan) exits non-zero only because the decision denies; written output is JSON
// where the command prints JSON.
func TestDocCommands(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	cmds := docCommands(t, "docs/policy.md", "README.md", "examples/policies/README.md")
	if len(cmds) < 5 {
		t.Fatalf("found %d policy commands in the docs, want at least 5 (test, eval, capabilities in docs/policy.md; test, eval in README.md)", len(cmds))
	}
	seen := map[string]bool{}
	for _, c := range cmds {
		t.Run(c.where+" "+strings.Join(c.args, " "), func(t *testing.T) {
			seen[c.args[1]] = true
			args := slices.Clone(c.args)
			replay := slices.Index(args, "--decision-log-line")
			if replay >= 0 && replay+1 < len(args) {
				// The doc's line file comes from a running CCM: make one the same way.
				args[replay+1] = decisionLogLine(t)
			}
			if out := slices.Index(args, "--out"); out >= 0 && out+1 < len(args) {
				args[out+1] = t.TempDir() // not into the repository (TestDocBareOpa runs it where the docs do)
			}
			var out bytes.Buffer
			err := runTool(newToolsCommand(), args, &out)
			var exit *exitError
			planDenied := c.args[0] == "plan" && errors.As(err, &exit) && exit.code == 1
			if denied := c.args[1] == "eval" && errors.Is(err, policy.ErrDenied); err != nil && !denied && !planDenied {
				t.Fatalf("%s: %v\n%s", strings.Join(c.args, " "), err, out.String())
			}
			if replay >= 0 {
				if !strings.Contains(out.String(), "same result as logged") {
					t.Errorf("replay output does not say the result is the logged one:\n%s", out.String())
				}
				return
			}
			if c.args[1] == "eval" || c.args[1] == "capabilities" || c.args[1] == "schema" {
				var v any
				if err := json.Unmarshal(out.Bytes(), &v); err != nil {
					t.Errorf("output is not JSON: %v\n%s", err, out.String())
				}
			}
		})
	}
	for _, sub := range []string{"test", "eval", "capabilities"} {
		if !seen[sub] {
			t.Errorf("no `hcloud-policy-ccm policy %s` command in the docs", sub)
		}
	}
}

// decisionLogLine writes the decision log line of the examples' lb_create_default decision, as
// the CCM logs it, to a file and returns its path.
func decisionLogLine(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	dl, err := policy.NewDecisionLog(policy.DecisionLogAll, &buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	files, err := policy.ReadDir("examples/policies")
	if err != nil {
		t.Fatal(err)
	}
	e := policy.NewEngine(policy.Options{DecisionLog: dl})
	if _, err := e.Load(context.Background(), files, policy.DirSource("examples/policies")); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("examples/policies/inputs/lb_create_default.json")
	if err != nil {
		t.Fatal(err)
	}
	var wrapped map[string]input.Input
	if err := json.Unmarshal(raw, &wrapped); err != nil {
		t.Fatal(err)
	}
	e.Decide(context.Background(), wrapped["lb_create_default"])
	line, _, _ := strings.Cut(buf.String(), "\n")
	if line == "" {
		t.Fatal("the engine logged no decision")
	}
	p := filepath.Join(t.TempDir(), "line.json")
	if err := os.WriteFile(p, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

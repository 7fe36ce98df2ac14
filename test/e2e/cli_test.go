//go:build e2e

package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLITools runs the offline tools of the built binary as a policy author does: the command
// line goes to the tools, not to the CCM (whose root carries klog's -v and 180 upstream flags),
// and policy test fails the issue 20 layout (fixtures under inputs/) the way the CCM rejects it.
func TestCLITools(t *testing.T) {
	t.Parallel()
	fixtures := t.TempDir()
	for name, content := range map[string]string{
		"ports.rego":                "package ccm\n\ndeny contains \"port 22 is not allowed\" if {\n\tinput.action == \"loadbalancer.create\"\n\tsome s in input.load_balancer.services\n\ts.listen_port == 22\n}\n",
		"ports_test.rego":           "package ccm_test\n\nimport data.ccm\n\ntest_ssh_denied if \"port 22 is not allowed\" in ccm.deny with input as data.inputs.lb_create_ssh\n",
		"inputs/lb_create_ssh.json": `{"lb_create_ssh": {"action": "loadbalancer.create", "load_balancer": {"services": [{"listen_port": 22}]}}}`,
	} {
		p := filepath.Join(fixtures, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		args     []string
		wantExit int
		want     []string // in the output (stdout and stderr)
		notWant  []string
	}{
		{"policy test -v as documented", []string{"policy", "test", "-v", "../../examples/policies"}, 0,
			[]string{"PASS: ", "data.ccm_test."}, nil},
		{"policy eval --help shows its flags only", []string{"policy", "eval", "--help"}, 0,
			[]string{"--policies", "--input", "--mode", "--failure-mode"}, []string{"--leader-elect", "--kubeconfig", "--version"}},
		{"the CCM's help lists the tools", []string{"--help"}, 0,
			[]string{"policy test", "policy eval", "policy capabilities", "--cloud-provider"}, nil},
		{"fixtures under inputs/ fail with the cause and the fix", []string{"policy", "test", fixtures}, 1,
			[]string{"FAIL: 1/1", "data.inputs.lb_create_ssh, undefined in this revision", "fixtures.json", "not loaded: " + filepath.Join(fixtures, "inputs", "lb_create_ssh.json")}, nil},
	}
	bin := ccmBinary(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			cmd := exec.Command(bin, tt.args...)
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			exit := 0
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				exit = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if exit != tt.wantExit {
				t.Errorf("exit code %d, want %d\n%s", exit, tt.wantExit, out.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(out.String(), w) {
					t.Errorf("output contains %q:\n%s", w, out.String())
				}
			}
		})
	}
}

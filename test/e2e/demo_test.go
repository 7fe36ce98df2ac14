//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// demoTimeout bounds the whole demo run (start, convergence, report, shutdown).
const demoTimeout = 3 * time.Minute

// TestDemo runs `make demo`'s runner (cmd/ccm-demo) end to end with --exit-after-report and
// checks its report: converged, nodes initialised with plugin labels, an external IP and a
// plugin-made name for default/web, the policy's message for the denied shop/web, and the
// emulator's request counts. Afterwards its temporary directory must be gone.
func TestDemo(t *testing.T) {
	harness.Bin(t, "kube-apiserver") // fail early with the command that builds it
	demo := filepath.Join(t.TempDir(), "ccm-demo")
	if out, err := exec.Command("go", "build", "-o", demo, "../../cmd/ccm-demo").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/ccm-demo: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), demoTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, demo,
		"--exit-after-report",
		"--kube-bin-dir="+harness.BinDir(),
		"--ccm-bin="+ccmBinary(t),
		"--plugins-dir="+demoPluginsDir(t),
	)
	cmd.Dir = "../.."                                                        // the repository root, as `make demo` runs it: deploy/ and examples/ from there
	cmd.Env = append(os.Environ(), "E2E_KEEP_LOGS=1")                        // to read the CCM's log below; removed by this test
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) } // let it clean up
	cmd.WaitDelay = 30 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	report := stdout.String()
	t.Logf("ccm-demo ran %s; report:\n%s", time.Since(start).Round(100*time.Millisecond), report)
	if err != nil {
		t.Fatalf("ccm-demo --exit-after-report: %v; stderr:\n%s", err, stderr.String())
	}

	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`demo: converged`),
		regexp.MustCompile(`(?m)^\s+worker-3\s+hcloud://104\s+cax11\s+hel1-dc2\s+cpu-arch=arm64,pool=batch,server-family=cax\s`),
		// An external IP and the name from the lb-name plugin (<cluster>-<namespace>-<name>-<hash>).
		regexp.MustCompile(`(?m)^\s+default/web\s+\d+\.\d+\.\d+\.\d+\S*\s+demo-default-web-[0-9a-f]{8}\s+\d+\s`),
		regexp.MustCompile(`(?m)^\s+shop/web\s+<pending>\s`),
		regexp.MustCompile(`namespace "shop" may not expose load balancers publicly`),
		regexp.MustCompile(`Hetzner API \(emulator\): \d+ requests, \d+ mutating`),
		regexp.MustCompile(`(?m)^\s+export KUBECONFIG=\S+`),
	} {
		if !want.MatchString(report) {
			t.Errorf("the report does not match %s", want)
		}
	}

	// The CCM logged no warning a newcomer would take for a problem. The logs were kept for this
	// check (E2E_KEEP_LOGS=1) and are removed here, before the check that nothing is left.
	if m := regexp.MustCompile(`(?m)^Logs: (\S+)`).FindStringSubmatch(report); m == nil {
		t.Error("the report names no log directory")
	} else {
		ccmLog, err := os.ReadFile(filepath.Join(m[1], "hcloud-policy-ccm.log"))
		if err != nil {
			t.Errorf("read the CCM's log: %v", err)
		}
		for _, unintended := range []string{
			"--configure-cloud-routes is set, but cloud provider does not support routes",
		} {
			if bytes.Contains(ccmLog, []byte(unintended)) {
				t.Errorf("the CCM's log has the warning %q", unintended)
			}
		}
		if err := os.RemoveAll(m[1]); err != nil {
			t.Errorf("remove the demo's logs: %v", err)
		}
	}

	// Everything was removed on exit, the directory of the kubeconfig included.
	if m := regexp.MustCompile(`export KUBECONFIG=(\S+)`).FindStringSubmatch(report); m != nil {
		if _, err := os.Stat(filepath.Dir(m[1])); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the demo's directory %s still exists after exit (stat: %v)", filepath.Dir(m[1]), err)
		}
	}
}

// demoPluginsDir returns a directory with both example plugins: $PLUGINS_DIR if set (`make
// plugins` builds them), otherwise fresh GOOS=wasip1 builds (.wasm, which the demo accepts).
func demoPluginsDir(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("PLUGINS_DIR"); dir != "" {
		return dir
	}
	dir := t.TempDir()
	for _, name := range []string{"node-labels", "lb-name"} {
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", filepath.Join(dir, name+".wasm"), "../../plugins/examples/"+name)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build the %s plugin: %v\n%s", name, err, out)
		}
	}
	return dir
}

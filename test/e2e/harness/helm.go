package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// DefaultHelmVersion is the helm version test/tools/helm pins (its go.mod).
const DefaultHelmVersion = "v3.22.0"

// helmTimeout bounds one helm call.
const helmTimeout = 2 * time.Minute

// HelmBin returns the helm binary: $HELM_BIN, or
// $HOME/.cache/hcloud-policy-ccm/helm-v3.22.0/helm (where `make helm-bin` puts it) when unset,
// failing the test with the command that builds it when it is missing.
func HelmBin(t T) string {
	t.Helper()
	path := os.Getenv("HELM_BIN")
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatalf("HELM_BIN is unset and the home directory is unknown: %v", err)
		}
		path = filepath.Join(home, ".cache", "hcloud-policy-ccm", "helm-"+DefaultHelmVersion, "helm")
	}
	if st, err := os.Stat(path); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		t.Fatalf("helm not found at %q: run `make helm-bin` (or test/tools/helm/build.sh %s) and set HELM_BIN to the binary",
			path, filepath.Dir(path))
	}
	return path
}

// Helm runs helm with args and returns its standard output, failing the test (with both
// outputs) if it exits non-zero.
func Helm(t T, args ...string) string {
	t.Helper()
	out, err := RunHelm(t, args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return out
}

// RunHelm runs helm with args and returns its standard output, or an error with both outputs
// if it exits non-zero (for tests of values the chart must refuse). It runs with its own empty config, cache and data directories
// and no kubeconfig, so nothing of the user's helm set-up or cluster is read: `helm template`
// and `helm lint` need neither.
func RunHelm(t T, args ...string) (string, error) {
	t.Helper()
	return runHelm(t, "", args...)
}

// Helm runs helm against the cluster as its admin (KUBECONFIG is the admin kubeconfig), for
// `helm install` and `helm upgrade`, with its own empty config, cache and data directories
// like RunHelm, and returns its standard output, failing the test (with both outputs) if it
// exits non-zero. Releases are stored in the cluster (Secrets), so successive calls see them.
func (c *Cluster) Helm(t T, args ...string) string {
	t.Helper()
	out, err := runHelm(t, c.Kubeconfig, args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return out
}

// runHelm runs helm with args and kubeconfig ("" for none).
func runHelm(t T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	bin := HelmBin(t)
	home, err := os.MkdirTemp("", "hcloud-e2e-helm-")
	if err != nil {
		t.Fatalf("helm home: %v", err)
	}
	defer os.RemoveAll(home)
	ctx, cancel := context.WithTimeout(context.Background(), helmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(helmEnv(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"),
	)
	if kubeconfig != "" {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+kubeconfig) // the later value wins
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// helmEnv is the environment of this process without HELM_* and KUBECONFIG.
func helmEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HELM_") || strings.HasPrefix(kv, "KUBECONFIG=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// ApplyFile applies the manifests in path as the cluster admin (`kubectl apply -f path`) and
// returns kubectl's output.
func (c *Cluster) ApplyFile(t T, path string) string {
	t.Helper()
	return c.Kubectl(t, "apply", "-f", path)
}

// Package deploy renders the kustomize manifests of deploy/ from the Helm chart deploy/chart, as
// the official CCM renders its deploy/ccm.yaml from its chart, and holds the checks that keep the
// chart, the manifests and the one policy directory, examples/policies, a single source:
//
//   - deploy/ccm.yaml and deploy/networks/ccm-networks.yaml are `helm template` of deploy/chart
//     with deploy/values.yaml (the second with networking.enabled=true). `go generate ./...`
//     (make generate) writes them through ./internal/genmanifests; TestManifestsCurrent fails,
//     naming that command, when a committed file differs from a fresh render. That test is what
//     keeps them current; nothing else does.
//   - deploy/chart/policies is a symbolic link to examples/policies: helm follows it when it loads
//     the chart directory and stores the files themselves in a `helm package` archive
//     (TestChartShipsTheExamplePolicies checks both). kustomize cannot follow such a link (its
//     load restrictor resolves links and refuses files outside the kustomization root), so the
//     manifests carry the policies in the rendered ConfigMap hcloud-ccm-policies.
//
// Rendering needs the helm binary that `make helm-bin` builds (test/tools/helm); see HelmBin.
package deploy

//go:generate go run ./internal/genmanifests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Manifest is one generated file of deploy/: where it goes and the helm flags it is rendered with.
type Manifest struct {
	Path string   // relative to the repository root
	Set  []string // --set values on top of deploy/values.yaml
}

// Manifests are the files rendered from the chart, the counterparts of the official
// deploy/ccm.yaml and deploy/ccm-networks.yaml.
var Manifests = []Manifest{
	{Path: "deploy/ccm.yaml"},
	{Path: "deploy/networks/ccm-networks.yaml", Set: []string{"networking.enabled=true"}},
}

const (
	chartDir    = "deploy/chart"
	valuesFile  = "deploy/values.yaml"
	release     = "hccm"
	namespace   = "kube-system"
	helmTimeout = 2 * time.Minute
	// Regenerate is the command that rewrites the generated files; failures name it.
	Regenerate = "make generate (or go generate ./test/deploy/)"
)

// Render returns the content of every Manifest, keyed by Path: a header naming the source and
// the command, then the output of `helm template` run from root, the repository root.
func Render(ctx context.Context, helm, root string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, m := range Manifests {
		args := []string{"template", release, chartDir, "--namespace", namespace, "--values", valuesFile}
		for _, s := range m.Set {
			args = append(args, "--set", s)
		}
		body, err := Helm(ctx, helm, root, args...)
		if err != nil {
			return nil, fmt.Errorf("render %s: %w", m.Path, err)
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, "# Code generated from %s and examples/policies by helm %s; DO NOT EDIT.\n", chartDir, strings.Join(args, " "))
		fmt.Fprintf(&b, "# Change the chart, %s or the policies, then run %s.\n", valuesFile, Regenerate)
		b.Write(body)
		out[m.Path] = b.Bytes()
	}
	return out, nil
}

// Helm runs helm with args in dir, with its own empty config, cache and data directories and no
// kubeconfig (so nothing of the user's helm set-up is read), and returns its standard output.
func Helm(ctx context.Context, helm, dir string, args ...string) ([]byte, error) {
	home, err := os.MkdirTemp("", "hcloud-deploy-helm-")
	if err != nil {
		return nil, fmt.Errorf("helm home: %w", err)
	}
	defer os.RemoveAll(home)
	ctx, cancel := context.WithTimeout(ctx, helmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// HelmBin returns the helm binary: $HELM_BIN if set, else where `make helm-bin` puts the version
// test/tools/helm/go.mod pins ($HOME/.cache/hcloud-policy-ccm/helm-<version>/helm). It returns an
// error naming `make helm-bin` when the binary is missing.
func HelmBin(root string) (string, error) {
	path := os.Getenv("HELM_BIN")
	if path == "" {
		version, err := helmVersion(filepath.Join(root, "test/tools/helm/go.mod"))
		if err != nil {
			return "", err
		}
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find helm: HELM_BIN is unset and the home directory is unknown: %w", err)
		}
		path = filepath.Join(home, ".cache", "hcloud-policy-ccm", "helm-"+version, "helm")
	}
	if st, err := os.Stat(path); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("find helm: no executable at %q: run `make helm-bin` (or set HELM_BIN to a helm v3 binary)", path)
	}
	return path, nil
}

// helmVersion reads the version of helm.sh/helm/v3 required by the go.mod at path.
func helmVersion(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("find helm version: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "helm.sh/helm/v3" && strings.HasPrefix(f[1], "v") {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("find helm version: %s requires no helm.sh/helm/v3", path)
}

// Root returns the repository root: the nearest directory at or above dir holding go.mod with
// the module github.com/policy-ccm/hcloud-policy-ccm.
func Root(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		raw, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(raw, []byte("module github.com/policy-ccm/hcloud-policy-ccm\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find repository root: no go.mod of github.com/policy-ccm/hcloud-policy-ccm above the working directory")
		}
		dir = parent
	}
}

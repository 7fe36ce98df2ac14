//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// languagePlugins returns the node_labels examples that compute example.com/size, arch and
// location from the request's facts, by language: $PLUGINS_DIR's (`make plugins plugins-rust
// plugins-as`), or fresh builds (`make plugins-rust plugins-as` into a temporary directory, and
// the Go module with go build).
func languagePlugins(t *testing.T) map[string]string {
	t.Helper()
	dir := os.Getenv("PLUGINS_DIR")
	if dir == "" {
		dir = t.TempDir()
		cmd := exec.Command("make", "-C", "../..", "plugins-rust", "plugins-as", "PLUGINS_OUT="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make plugins-rust plugins-as: %v\n%s", err, out)
		}
		build := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", filepath.Join(dir, "labels-and-name.wasm"), "../../plugins/examples/labels-and-name")
		build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build labels-and-name: %v\n%s", err, out)
		}
	}
	goModule := filepath.Join(dir, "labels-and-name.wasm.gz")
	if _, err := os.Stat(goModule); err != nil {
		goModule = filepath.Join(dir, "labels-and-name.wasm")
	}
	return map[string]string{
		"go":             goModule,
		"rust":           filepath.Join(dir, "rust-labels.wasm"),
		"assemblyscript": filepath.Join(dir, "as-labels.wasm"),
	}
}

// TestCCMNodeLabelsPluginLanguages runs the CCM with the Go, Rust and AssemblyScript examples
// in turn and checks that each labels an initialised node the same way, from the server type's
// hardware facts in the node_labels request (cax11: 2 cores, arm; in nbg1).
func TestCCMNodeLabelsPluginLanguages(t *testing.T) {
	t.Parallel()
	harness.Bin(t, "kube-apiserver") // fail early with the command that builds it
	modules := languagePlugins(t)
	want := map[string]string{"example.com/size": "small", "example.com/arch": "arm", "example.com/location": "nbg1"}
	for _, lang := range []string{"go", "rust", "assemblyscript"} {
		t.Run(lang, func(t *testing.T) {
			c := harness.Start(t)
			c.ApplyKustomize(t, deployDir)
			emu, endpoint := hcloudemu.NewTestServer(t)
			id := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-1", Type: "cax11", Location: "nbg1"})
			c.CreateNode(t, "worker-1", "10.244.1.0/24")
			ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{args: []string{"--plugin-node-labels=" + modules[lang]}})
			node := waitInitialised(t, c, ccm, "worker-1", id)
			got := map[string]string{}
			for k, v := range node.Labels {
				if strings.HasPrefix(k, "example.com/") {
					got[k] = v
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s plugin's labels on worker-1 (-want +got):\n%s", lang, diff)
			}
		})
	}
}

package plugins_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
)

// TestPlugin_nodeInputDatacenter: the node_labels input carries the server's datacenter through
// the host (JSON in guest memory) into the Go SDK of a stock-Go plugin.
func TestPlugin_nodeInputDatacenter(t *testing.T) {
	wasm := filepath.Join(t.TempDir(), "datacenter.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s -w", "-o", wasm, "./testdata/datacenter")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOTOOLCHAIN=local", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build testdata/datacenter: %v\n%s", err, out)
	}
	p, err := plugins.Load(context.Background(), wasm, plugins.Options{CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	in := nodeIn
	in.Server.Datacenter = "fsn1-dc14"
	got, err := p.NodeLabels(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"example.com/datacenter": "fsn1-dc14", "example.com/location": "fsn1"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
}

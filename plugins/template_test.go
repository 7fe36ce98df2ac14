package plugins_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
)

func TestInit(t *testing.T) {
	tests := []struct {
		lang      string
		wantFiles []string
	}{
		{"go", []string{"go.mod", "main.go", "testdata/cases/node_labels/arm.request.json", "testdata/cases/load_balancer_name/web.reply.json"}},
		{"rust", []string{"Cargo.toml", ".cargo/config.toml", "src/lib.rs", "testdata/cases/dedicated.request.json"}},
		{"as", []string{"package.json", "package-lock.json", "assembly/index.ts", "testdata/cases/large.reply.json"}},
	}
	for _, tc := range tests {
		t.Run(tc.lang, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "my-plugin")
			var out bytes.Buffer
			if err := plugins.Init(tc.lang, dir, &out); err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.wantFiles {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("missing %s: %v", f, err)
				}
			}
			if !strings.Contains(out.String(), "plugin test --module") {
				t.Errorf("output does not say what to run next:\n%s", out.String())
			}
			if err := plugins.Init(tc.lang, dir, &out); err == nil || !strings.Contains(err.Error(), "is not empty") {
				t.Errorf("a second init into %s: error %v, want 'is not empty'", dir, err)
			}
		})
	}
	if err := plugins.Init("cobol", t.TempDir(), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), `unknown language "cobol" (known: as, go, rust)`) {
		t.Errorf("error %v", err)
	}
}

// TestInit_goBuildsAndPasses: the Go project plugin init writes builds (against this
// checkout's SDK, as the vendoring note in its go.mod says) and passes its own cases.
func TestInit_goBuildsAndPasses(t *testing.T) {
	dir := t.TempDir()
	if err := plugins.Init("go", dir, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	sdk, err := filepath.Abs("sdk")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "GOWORK=off", "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	for _, args := range [][]string{
		{"mod", "edit", "-replace=github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk=" + sdk},
		{"build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s -w", "-o", "plugin.wasm", "."},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	var out bytes.Buffer
	if _, err := plugins.RunTests(context.Background(), filepath.Join(dir, "plugin.wasm"), filepath.Join(dir, "testdata/cases"), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
}

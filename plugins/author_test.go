package plugins_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
)

// writeFiles writes files (path relative to dir → content) and returns dir.
func writeFiles(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fixtureFile writes testdata/<name>.wasm (or the given bytes) to a temporary file.
func fixtureFile(t *testing.T, name string, wasm []byte) string {
	t.Helper()
	if wasm == nil {
		wasm = fixture(t, name)
	}
	path := filepath.Join(t.TempDir(), name+".wasm")
	if err := os.WriteFile(path, wasm, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const nodeRequest = `{"node_name": "worker-1", "node_labels": {}, "server": {"id": 1, "name": "worker-1", "type": "cax21"}}`

func TestBench(t *testing.T) {
	input := writeFiles(t, t.TempDir(), map[string]string{"node.json": nodeRequest})
	in := filepath.Join(input, "node.json")
	r, err := plugins.Bench(context.Background(), fixtureFile(t, "good", nil), plugins.HookNodeLabels, in, 200)
	if err != nil {
		t.Fatal(err)
	}
	if r.Calls != 200 || r.P50 <= 0 || r.P50 > r.P99 || r.P99 > r.Max {
		t.Errorf("result %+v: want 200 calls and 0 < p50 <= p99 <= max", r)
	}
	if r.MemoryBytes != 65536 { // good.wat declares one page
		t.Errorf("instance memory %d bytes, want 65536", r.MemoryBytes)
	}
	if !strings.HasPrefix(r.String(), "200 calls: p50 ") || !strings.HasSuffix(r.String(), "instance memory 0.06 MiB") {
		t.Errorf("String() = %q", r.String())
	}
	for _, tc := range []struct{ name, fixture, want string }{
		{"a trapping module fails at the warm-up call", "trap", "warm-up call: plugin"},
		{"zero calls are refused", "good", "0 calls, want at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 10
			if tc.fixture == "good" {
				n = 0
			}
			if _, err := plugins.Bench(context.Background(), fixtureFile(t, tc.fixture, nil), plugins.HookNodeLabels, in, n); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		paths   func(t *testing.T) []string
		want    []string // substrings of the report
		wantErr string
	}{
		{
			name:  "a small module fits, and its hooks and ABI version are listed",
			paths: func(t *testing.T) []string { return []string{fixtureFile(t, "good", nil)} },
			want: []string{"alone in a ConfigMap (gzipped): fits", "exports: ccm_node_labels (node_labels), ccm_lb_name (load_balancer_name)",
				"ABI version: 1"},
		},
		{
			name:    "a module the host refuses is reported with the reason",
			paths:   func(t *testing.T) []string { return []string{fixtureFile(t, "abi2", nil)} },
			want:    []string{"refused by the host: load plugin", "ccm_abi_version returned 2"},
			wantErr: "does not load",
		},
		{
			name: "the two Go examples each fit, but not one ConfigMap together",
			paths: func(t *testing.T) []string {
				return []string{goExample(t, "node-labels"), goExample(t, "lb-name")}
			},
			want:    []string{"alone in a ConfigMap (gzipped): fits", "apply with kubectl apply --server-side", "together: ", "does not fit ("},
			wantErr: "do not fit one ConfigMap together",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := plugins.Check(context.Background(), tc.paths(t), &out)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("report lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestRunTests(t *testing.T) {
	good := fixtureFile(t, "good", nil)
	wat := fixtureFile(t, "wat-labels", watLabels)
	lbRequest := `{"cluster_name": "c", "default_name": "d", "service": {"namespace": "n", "name": "s", "uid": "u"}}`
	tests := []struct {
		name      string
		module    string
		files     map[string]string
		wantLines []string
		wantErr   string
	}{
		{
			name: "cases in hook directories pass or fail on the reply as JSON values", module: good,
			files: map[string]string{
				"node_labels/ok.request.json":         nodeRequest,
				"node_labels/ok.reply.json":           `{"labels": {"example.com/lang": "wat", "example.com/fixture": "good"}}`,
				"node_labels/wrong.request.json":      nodeRequest,
				"node_labels/wrong.reply.json":        `{"labels": {"example.com/lang": "go"}}`,
				"load_balancer_name/ok.request.json":  lbRequest,
				"load_balancer_name/ok.reply.json":    `{"name": "wat-lb"}`,
				"load_balancer_name/err.request.json": lbRequest,
				"load_balancer_name/err.reply.json":   `{"error": "boom"}`,
			},
			wantLines: []string{
				"ok   node_labels/ok (node_labels)",
				`FAIL node_labels/wrong (node_labels): reply {"labels":{"example.com/fixture":"good","example.com/lang":"wat"}}, want {"labels":{"example.com/lang":"go"}}`,
				`FAIL load_balancer_name/err (load_balancer_name): the call succeeded with {"name":"wat-lb"}, want an error containing "boom"`,
				"ok   load_balancer_name/ok (load_balancer_name)",
			},
			wantErr: "2 of 4 cases failed",
		},
		{
			name: "files directly in DIR use a one-hook module's hook, and an expected error passes", module: wat,
			files: map[string]string{
				"ok.request.json":  nodeRequest,
				"ok.reply.json":    `{"labels": {"node.hcloud.example/plugin-language": "wat"}}`,
				"bad.request.json": `{"node_nmae": "x"}`, //nolint:misspell // the typo is the test
				"bad.reply.json":   `{"error": "unknown field"}`,
			},
			wantLines: []string{"ok   bad (node_labels)", "ok   ok (node_labels)", "PASS: 2 cases"},
		},
		{
			name: "files directly in DIR are refused for a two-hook module", module: good,
			files:   map[string]string{"ok.request.json": nodeRequest, "ok.reply.json": `{}`},
			wantErr: "cases go in",
		},
		{
			name: "a request without its reply is an error", module: wat,
			files:   map[string]string{"ok.request.json": nodeRequest},
			wantErr: "no expected reply",
		},
		{name: "an empty directory is an error", module: wat, wantErr: "no case"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, t.TempDir(), tc.files)
			var out bytes.Buffer
			_, err := plugins.RunTests(context.Background(), tc.module, dir, &out)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			if tc.wantLines != nil {
				if d := cmp.Diff(tc.wantLines, strings.Split(strings.TrimSpace(out.String()), "\n")); d != "" {
					t.Errorf("output (-want +got):\n%s", d)
				}
			}
		})
	}
}

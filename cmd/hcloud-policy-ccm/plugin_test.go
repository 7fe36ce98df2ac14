package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// execTool runs the tools command with args and returns its output and error.
func execTool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newToolsCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestPluginSchema(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantTitle string
		wantErr   string
	}{
		{name: "the default is the node_labels request", args: []string{"plugin", "schema"}, wantTitle: "node_labels request (ABI v1)"},
		{name: "--reply prints the reply", args: []string{"plugin", "schema", "--hook", "load_balancer_name", "--reply"}, wantTitle: "load_balancer_name reply (ABI v1)"},
		{name: "an unknown hook is named", args: []string{"plugin", "schema", "--hook", "nope"}, wantErr: `unknown hook "nope"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := execTool(t, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s struct{ Title string }
			if err := json.Unmarshal([]byte(out), &s); err != nil || s.Title != tc.wantTitle {
				t.Errorf("title = %q (%v), want %q", s.Title, err, tc.wantTitle)
			}
		})
	}
}

// TestPluginAuthorTools runs the author subcommands on the host's good fixture (both hooks).
func TestPluginAuthorTools(t *testing.T) {
	const good = "../../plugins/testdata/good.wasm"
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{name: "run --bench times the calls", args: []string{"plugin", "run", "--module", good, "--hook", "node_labels", "--input", "../../plugins/examples/node-labels/testdata/input.json", "--bench", "5"}, want: "5 calls: p50 "},
		{name: "check reports the fit", args: []string{"plugin", "check", good}, want: "alone in a ConfigMap (gzipped): fits"},
		{name: "test needs --module", args: []string{"plugin", "test", "dir"}, wantErr: "--module is required"},
		{name: "test runs the cases", args: []string{"plugin", "test", "--module", good, t.TempDir()}, wantErr: "no case"},
		{name: "init writes a project", args: []string{"plugin", "init", "--lang", "rust", t.TempDir()}, want: "src/lib.rs"},
		{name: "init names the languages", args: []string{"plugin", "init", "--lang", "c", t.TempDir()}, wantErr: "known: as, go, rust"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := execTool(t, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !strings.Contains(out, tc.want) {
				t.Errorf("output %q, error %v, want %q", out, err, tc.want)
			}
		})
	}
}

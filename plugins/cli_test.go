package plugins_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
)

func TestRunCLI(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.wasm")
	if err := os.WriteFile(good, fixture(t, "good"), 0o600); err != nil {
		t.Fatal(err)
	}
	typo := filepath.Join(dir, "typo.json")
	if err := os.WriteFile(typo, []byte(`{"node_nmae":"x"}`), 0o600); err != nil { //nolint:misspell // the typo is the test
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		module string
		hook   string
		input  string
		want   string // output, or the error's substring
		err    bool
	}{
		{
			name: "node_labels prints the validated labels", module: good, hook: plugins.HookNodeLabels,
			input: "examples/node-labels/testdata/input.json",
			want:  "{\n  \"labels\": {\n    \"example.com/fixture\": \"good\",\n    \"example.com/lang\": \"wat\"\n  }\n}\n",
		},
		{
			name: "load_balancer_name prints the name", module: good, hook: plugins.HookLoadBalancerName,
			input: "examples/lb-name/testdata/input.json", want: "{\n  \"name\": \"wat-lb\"\n}\n",
		},
		{name: "An unknown hook is an error", module: good, hook: "lb_name", input: typo, want: `unknown hook "lb_name"`, err: true},
		{name: "A typo in the input is an error", module: good, hook: plugins.HookNodeLabels, input: typo, want: `unknown field "node_nmae"`, err: true}, //nolint:misspell // the typo is the test
		{name: "A missing input is an error", module: good, hook: plugins.HookNodeLabels, input: filepath.Join(dir, "none.json"), want: "no such file", err: true},
		{name: "A missing module is an error", module: filepath.Join(dir, "none.wasm"), hook: plugins.HookNodeLabels, input: "examples/node-labels/testdata/input.json", want: "load plugin", err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := plugins.RunCLI(context.Background(), tc.module, tc.hook, tc.input, &out)
			switch {
			case tc.err && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			case !tc.err && err != nil:
				t.Errorf("error %v", err)
			case !tc.err && out.String() != tc.want:
				t.Errorf("output %q, want %q", out.String(), tc.want)
			}
		})
	}
}

func TestRunCLI_GoExample(t *testing.T) {
	var out bytes.Buffer
	err := plugins.RunCLI(context.Background(), goExample(t, "lb-name"), plugins.HookLoadBalancerName, "examples/lb-name/testdata/input.json", &out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"name": "prod-shop-web-`) {
		t.Errorf("output %q", out.String())
	}
}

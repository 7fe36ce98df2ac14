package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk/nodelabels"
)

func TestLabels(t *testing.T) {
	tests := []struct {
		name string
		in   sdk.Server
		want map[string]string
	}{
		{
			name: "An arm server gets its family, arm64 and its prefixed labels",
			in:   sdk.Server{Type: "cax21", Labels: map[string]string{Prefix + "pool": "db", "env": "prod"}},
			want: map[string]string{Prefix + "pool": "db", Prefix + "server-family": "cax", Prefix + "cpu-arch": "arm64"},
		},
		{
			name: "A shared x86 server is amd64",
			in:   sdk.Server{Type: "cx22"},
			want: map[string]string{Prefix + "server-family": "cx", Prefix + "cpu-arch": "amd64"},
		},
		{
			name: "A server without a type gets only its prefixed labels",
			in:   sdk.Server{Labels: map[string]string{Prefix + "a": "b"}},
			want: map[string]string{Prefix + "a": "b"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Labels(sdk.NodeInput{Server: tc.in})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("labels (-want +got):\n%s", d)
			}
		})
	}
}

func TestServe(t *testing.T) {
	got := string(nodelabels.Serve([]byte(`{"server":{"type":"ccx13"}}`)))
	want := `{"labels":{"node.hcloud.example/cpu-arch":"amd64","node.hcloud.example/server-family":"ccx"}}`
	if got != want {
		t.Errorf("reply = %s, want %s", got, want)
	}
}

// FuzzLabels checks that every label set the plugin computes from valid server labels passes
// the host's validation.
func FuzzLabels(f *testing.F) {
	f.Add("cax21", "pool", "db")
	f.Add("", "", "")
	f.Add("cx22", "a_b", "x.y")
	f.Fuzz(func(t *testing.T, serverType, name, value string) {
		labels := map[string]string{Prefix + name: value}
		if plugins.ValidateLabels(labels) != nil {
			return // Hetzner only stores valid labels
		}
		got, err := Labels(sdk.NodeInput{Server: sdk.Server{Type: serverType, Labels: labels}})
		if err != nil {
			return
		}
		if err := plugins.ValidateLabels(got); err != nil && validType(serverType) {
			t.Errorf("Labels(type %q, %q=%q): %v", serverType, Prefix+name, value, err)
		}
	})
}

// validType reports whether s looks like a Hetzner server type: lowercase letters then digits.
func validType(s string) bool {
	return plugins.ValidateLabels(map[string]string{"t": s}) == nil
}

package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
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

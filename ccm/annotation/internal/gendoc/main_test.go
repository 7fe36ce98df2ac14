package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGeneratedCurrent fails when docs/reference/annotations.md drifted from the doc comments;
// fix it with `make generate` (go generate ./...).
func TestGeneratedCurrent(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("../..", srcPath))
	if err != nil {
		t.Fatal(err)
	}
	got, err := render(src)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("../..", outPath))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("docs/reference/annotations.md is stale; run make generate (go generate ./...) (-committed +generated):\n%s", diff)
	}
	if !strings.Contains(string(got), "| `load-balancer.hetzner.cloud/location` | string | none (HCLOUD_LOAD_BALANCERS_LOCATION) | create-time only (a later change is ignored, as with the official CCM) |") {
		t.Errorf("location row missing or wrong:\n%s", got)
	}
}

func TestRender_trailers(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		ok   bool
	}{
		{name: "a doc with all trailers parses", doc: "// LBX is x.\n//\n// Type: bool\n// Default: false\n// Changes: none\n", ok: true},
		{name: "a doc without Changes is rejected", doc: "// LBX is x.\n//\n// Type: bool\n// Default: false\n"},
		{name: "a doc without Type is rejected", doc: "// LBX is x.\n//\n// Default: false\n// Changes: none\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := "package annotation\n\nconst (\n" + tc.doc + "LBX Name = \"load-balancer.hetzner.cloud/x\"\n)\n"
			md, err := render([]byte(src))
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if tc.ok && !strings.Contains(string(md), "| `load-balancer.hetzner.cloud/x` | bool | false | none | X. |") {
				t.Errorf("row missing:\n%s", md)
			}
		})
	}
}

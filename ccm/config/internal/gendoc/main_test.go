package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGeneratedCurrent fails when docs/reference/env.md is out of date with ccm/config/envs.go.
// Fix it with `make generate` (go generate ./...).
func TestGeneratedCurrent(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("../..", srcPath))
	if err != nil {
		t.Fatal(err)
	}
	want, err := Render(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("../..", outPath))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("docs/reference/env.md is stale; run make generate (go generate ./...) (-want +got):\n%s", diff)
	}
}

func TestRender(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		want    string
		wantErr string
	}{
		{
			name: "a documented constant becomes a table row",
			src: `package config
const (
	// EnvX is the x of the thing | with a pipe.
	//
	// Type: bool
	// Default: true
	EnvX = "X"
)`,
			want: "| `X` | bool | true | The x of the thing \\| with a pipe. |\n",
		},
		{
			name: "a constant without a Default trailer is an error",
			src: `package config
const (
	// EnvX is x.
	//
	// Type: bool
	EnvX = "X"
)`,
			wantErr: `constant EnvX needs a "Default:" trailer line`,
		},
		{
			name:    "a file without constants is an error",
			src:     "package config\n",
			wantErr: "no documented string constants found",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Render([]byte(tc.src))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Render() error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(string(got), tc.want) {
				t.Errorf("Render() =\n%s\nwant it to end with\n%s", got, tc.want)
			}
		})
	}
}

package main

import (
	"bytes"
	"os"
	"reflect"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm"
)

// TestVersionCommand runs `version` in this test binary, which links the same modules as the CCM
// binary, and checks each printed module version against the require line of go.mod.
func TestVersionCommand(t *testing.T) {
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	cmd := newToolsCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if want := "hcloud-policy-ccm " + ccm.Version; lines[0] != want {
		t.Errorf("first line = %q, want %q", lines[0], want)
	}
	if len(lines) != 2+len(versionModules) {
		t.Fatalf("version printed %d lines, want %d:\n%s", len(lines), 2+len(versionModules), out.String())
	}
	for i, m := range versionModules {
		req := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(m) + `\s+(v\S+)`).FindSubmatch(gomod)
		if req == nil {
			t.Fatalf("go.mod does not require %s", m)
		}
		if want := m + " " + string(req[1]); lines[2+i] != want {
			t.Errorf("line %d = %q, want %q (go.mod)", 2+i, lines[2+i], want)
		}
	}
}

func TestVersionText(t *testing.T) {
	for _, tt := range []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "hcloud-policy-ccm v1.2.3\ngo unknown\n" +
			"github.com/open-policy-agent/opa unknown\ngithub.com/tetratelabs/wazero unknown\nk8s.io/cloud-provider unknown\n"},
		{"replaced and missing modules", &debug.BuildInfo{GoVersion: "go1.26.8", Deps: []*debug.Module{
			{Path: "github.com/open-policy-agent/opa", Version: "v1.22.2"},
			{Path: "github.com/tetratelabs/wazero", Version: "v1.12.0", Replace: &debug.Module{Path: "example.com/wazero", Version: "v1.12.1"}},
		}}, "hcloud-policy-ccm v1.2.3\ngo go1.26.8\n" +
			"github.com/open-policy-agent/opa v1.22.2\ngithub.com/tetratelabs/wazero v1.12.1\nk8s.io/cloud-provider unknown\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := versionText("v1.2.3", tt.info); got != tt.want {
				t.Errorf("versionText = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestVersionStampTarget checks that the -X flags of the Makefile and deploy/Dockerfile name the
// variable `version` prints (a wrong path makes the linker ignore -X silently, leaving "dev").
func TestVersionStampTarget(t *testing.T) {
	want := "-X " + reflect.TypeFor[ccm.Cloud]().PkgPath() + ".Version="
	for _, f := range []string{"../../Makefile", "../../deploy/Dockerfile"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("%s lacks %q: the version would not be stamped", f, want)
		}
	}
}

package lbplan_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPlannersAreLight lists the dependencies of the pure planners (go list -deps, which reads
// imports without compiling) and fails when one of them links the policy engine, OPA or
// client-go. The planners build policy inputs from the leaf package policy/input; what they
// link is what `plan`, the admission webhook and every test of a planner pay for. It names each
// import that leads from the planner's allowed dependencies into a forbidden package.
func TestPlannersAreLight(t *testing.T) {
	forbidden := func(path string) bool {
		return path == "github.com/policy-ccm/hcloud-policy-ccm/policy" || // the engine; policy/input is the leaf
			strings.HasPrefix(path, "github.com/open-policy-agent/opa/") ||
			strings.HasPrefix(path, "k8s.io/client-go/")
	}
	for _, planner := range []string{
		"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan",
		"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice",
		"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbgroup",
		"github.com/policy-ccm/hcloud-policy-ccm/ccm/routeplan",
		"github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory", // the input builder's pricing, shared with plan and the webhook
	} {
		out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, planner).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", planner, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) < 2 {
			t.Fatalf("go list -deps %s listed %d packages; want the planner and its dependencies", planner, len(lines))
		}
		for _, line := range lines {
			pkg, imports, _ := strings.Cut(line, " ")
			if forbidden(pkg) { // name the edge into the forbidden packages only
				continue
			}
			for _, imp := range strings.Fields(imports) {
				if forbidden(imp) {
					t.Errorf("%s links %s (imported by %s): the planners must stay free of the policy engine, OPA and client-go; take the input types from policy/input",
						planner, imp, pkg)
				}
			}
		}
	}
}

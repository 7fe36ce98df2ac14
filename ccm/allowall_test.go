package ccm_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// TestAllowAllPolicyEqualsNoPolicy runs the same create, update and delete with no policy and
// with a policy that allows everything, and requires the Hetzner API to see the same requests
// (method, route and body, in order): the gate adds no request and changes none.
func TestAllowAllPolicyEqualsNoPolicy(t *testing.T) {
	allowAll := t.TempDir()
	writeFile(t, filepath.Join(allowAll, "allow.rego"),
		"package ccm\n\ndeny contains msg if {\n\tinput.action == \"never\"\n\tmsg := \"never\"\n}\n")

	run := func(policyDir string) []string {
		cloud, emu := newBudgetCloud(t, 3, policyDir)
		lbs, _ := cloud.LoadBalancer()
		ctx := context.Background()
		svc, nodes := lbService("web"), lbNodes(3)
		if _, err := lbs.EnsureLoadBalancer(ctx, "budget", svc, nodes); err != nil {
			t.Fatal(err)
		}
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, NodePort: 30443})
		if err := lbs.UpdateLoadBalancer(ctx, "budget", svc, nodes[:2]); err != nil {
			t.Fatal(err)
		}
		if _, err := lbs.EnsureLoadBalancer(ctx, "budget", svc, nodes[:2]); err != nil {
			t.Fatal(err)
		}
		if err := lbs.EnsureLoadBalancerDeleted(ctx, "budget", svc); err != nil {
			t.Fatal(err)
		}
		var log []string
		for _, r := range emu.Requests() {
			log = append(log, fmt.Sprintf("%s %s %s", r.Route, r.Query, r.Body))
		}
		return log
	}
	without, with := run(""), run(allowAll)
	if len(without) < 5 {
		t.Fatalf("the run without a policy made only %d requests: %v", len(without), without)
	}
	if diff := cmp.Diff(without, with); diff != "" {
		t.Errorf("requests differ with an allow-all policy (-no policy +allow-all):\n%s", diff)
	}
}

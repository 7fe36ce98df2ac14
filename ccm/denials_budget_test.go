package ccm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

const freezeRules = `package ccm

deny contains "no new load balancers this week" if input.action == "loadbalancer.create"

deny contains "no deletes this week" if input.action == "loadbalancer.delete"
`

// denyingPolicy writes a policy that denies every create and every delete of a load balancer.
func denyingPolicy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "freeze.rego"), []byte(freezeRules), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAPIBudget_deniedRetryAfterNewRevision: a remembered denial does not outlive the policy
// revision it was decided by: once a revision that allows the Service is in force, the next
// retry creates the load balancer.
func TestAPIBudget_deniedRetryAfterNewRevision(t *testing.T) {
	dir := denyingPolicy(t)
	cloud, emu := newBudgetCloud(t, 3, dir)
	lbs, _ := cloud.LoadBalancer()
	ctx := context.Background()
	svc, nodes := lbService("web"), lbNodes(3)
	for range 2 {
		if _, err := lbs.EnsureLoadBalancer(ctx, "budget", svc, nodes); !errors.Is(err, policy.ErrDenied) {
			t.Fatalf("EnsureLoadBalancer = %v, want denied", err)
		}
	}
	allowCreates := strings.Replace(freezeRules, `"loadbalancer.create"`, `"loadbalancer.none"`, 1)
	if err := os.WriteFile(filepath.Join(dir, "freeze.rego"), []byte(allowCreates), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second) // the watch reloads on the file event, or within 10 s
	for {
		_, err := lbs.EnsureLoadBalancer(ctx, "budget", svc, nodes)
		if err == nil {
			break
		}
		if !errors.Is(err, policy.ErrDenied) || time.Now().After(deadline) {
			t.Fatalf("EnsureLoadBalancer after the policy allowed creates = %v, want a load balancer", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := len(emu.LoadBalancers()); n != 1 {
		t.Errorf("%d load balancers, want 1", n)
	}
}

// TestAPIBudget_deniedRetries: the service controller retries a denied Service with backoff;
// a retry whose inputs are unchanged costs no Hetzner request, and any change of the inputs
// (an annotation, the node set) is decided again with fresh reads.
func TestAPIBudget_deniedRetries(t *testing.T) {
	const services = 50
	cloud, emu := newBudgetCloud(t, 3, denyingPolicy(t))
	lbs, _ := cloud.LoadBalancer()
	ctx := context.Background()
	nodes := lbNodes(3)
	svcs := make([]*corev1.Service, services)
	ensureAll := func(round string) int {
		t.Helper()
		emu.ResetRequests()
		for _, svc := range svcs {
			if _, err := lbs.EnsureLoadBalancer(ctx, "budget", svc, nodes); !errors.Is(err, policy.ErrDenied) {
				t.Fatalf("%s: EnsureLoadBalancer(%s) = %v, want denied", round, svc.Name, err)
			}
		}
		if m := emu.MutatingRequests(); m != 0 {
			t.Fatalf("%s: %d mutating requests for denied Services", round, m)
		}
		return total(emu.Counts())
	}
	for i := range svcs {
		svcs[i] = lbService(fmt.Sprintf("web-%d", i))
	}

	first := ensureAll("first try")
	if first < services {
		t.Fatalf("first try: %d requests for %d Services, want at least one read each (%v)", first, services, emu.Counts())
	}
	t.Logf("first try of %d denied Services: %d requests (%.1f per Service), %v", services, first, float64(first)/services, emu.Counts())
	for round := range 3 {
		if got := ensureAll(fmt.Sprintf("retry %d", round+1)); got != 0 {
			t.Errorf("retry %d of %d unchanged denied Services: %d requests, want 0 (%v)", round+1, services, got, emu.Counts())
		}
	}

	// Changes are decided again, with fresh reads.
	changes := []struct {
		name   string
		change func() (*corev1.Service, []*corev1.Node)
	}{
		{"an annotation", func() (*corev1.Service, []*corev1.Node) {
			svc := svcs[0].DeepCopy()
			svc.Annotations = map[string]string{"load-balancer.hetzner.cloud/type": "lb21"}
			return svc, nodes
		}},
		{"the node set", func() (*corev1.Service, []*corev1.Node) { return svcs[1], nodes[:2] }},
		{"a node's labels", func() (*corev1.Service, []*corev1.Node) {
			other := lbNodes(3)
			other[2].Labels = map[string]string{"pool": "b"}
			return svcs[2], other
		}},
	}
	for _, c := range changes {
		svc, ns := c.change()
		emu.ResetRequests()
		if _, err := lbs.EnsureLoadBalancer(ctx, "budget", svc, ns); !errors.Is(err, policy.ErrDenied) {
			t.Fatalf("after a change of %s: %v, want denied", c.name, err)
		}
		if got := total(emu.Counts()); got == 0 {
			t.Errorf("after a change of %s: no request, want the load balancer read again", c.name)
		}
	}

	// A denied delete: the retry costs nothing either.
	gone := lbService("gone")
	if _, err := emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: "gone", Labels: map[string]string{lbplan.LabelServiceUID: string(gone.UID)}}); err != nil {
		t.Fatal(err)
	}
	for try := range 2 {
		emu.ResetRequests()
		if err := lbs.EnsureLoadBalancerDeleted(ctx, "budget", gone); !errors.Is(err, policy.ErrDenied) {
			t.Fatalf("delete try %d: %v, want denied", try+1, err)
		}
		if got := total(emu.Counts()); (got == 0) != (try > 0) {
			t.Errorf("delete try %d: %d requests, want some on the first and none on the retry (%v)", try+1, got, emu.Counts())
		}
	}
}

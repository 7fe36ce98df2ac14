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
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/requeue"
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

// TestAPIBudget_deniedRetriesWithTheShippedPolicies (issue 40 §2): under the example policies
// as they ship, quotas.rego included (it reads input.inventory), 50 Services the policies deny
// (port 8080, outside data.config.listen_ports) cost their first round, and then nothing:
// retries made by the CCM's own requeue (a new value of the retry annotation each round, as
// after a policy revision, a namespace change or room in the inventory that changes no verdict)
// are answered by the denial cache, without a request.
func TestAPIBudget_deniedRetriesWithTheShippedPolicies(t *testing.T) {
	const services = 50
	cloud, emu := newBudgetCloud(t, 3, shippedPolicies(t))
	lbs, _ := cloud.LoadBalancer()
	ctx := context.Background()
	nodes := lbNodes(3)
	svcs := make([]*corev1.Service, services)
	for i := range svcs {
		svcs[i] = lbService(fmt.Sprintf("web-%d", i))
		svcs[i].Spec.Ports[0].Port = 8080
	}
	for round := range 4 {
		emu.ResetRequests()
		for _, svc := range svcs {
			if round > 0 {
				svc.Annotations = map[string]string{requeue.Annotation: fmt.Sprintf("policy revision x at round %d", round)}
			}
			if _, err := lbs.EnsureLoadBalancer(ctx, "budget", svc, nodes); !errors.Is(err, policy.ErrDenied) {
				t.Fatalf("round %d: EnsureLoadBalancer(%s) = %v, want denied", round, svc.Name, err)
			}
		}
		got := total(emu.Counts())
		t.Logf("round %d of %d denied Services: %d requests %v", round, services, got, emu.Counts())
		if round > 0 && got != 0 {
			t.Errorf("retry round %d of %d unchanged denied Services: %d requests, want 0 (%v)", round, services, got, emu.Counts())
		}
		if emu.MutatingRequests() != 0 {
			t.Fatalf("round %d: mutating requests for denied Services: %v", round, emu.Counts())
		}
	}
}

const no443Rules = `package ccm

deny contains {"msg": "port 443 is not allowed", "code": "no443"} if {
	input.operation == "add_service"
	input.listener.listen_port == 443
}
`

// TestAPIBudget_partlyDeniedRetries: a denied listener on a live load balancer fails alone
// (steps fail alone): the node that joins and the one that leaves change as targets, no request
// goes for the listener, and the retries of the unchanged Service, which plan only the denied
// step now, cost no request, for the Ensure and for the node sync's Update.
func TestAPIBudget_partlyDeniedRetries(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "no443.rego"), []byte(no443Rules), 0o600); err != nil {
		t.Fatal(err)
	}
	cloud, emu := newBudgetCloud(t, 4, dir)
	lbs, _ := cloud.LoadBalancer()
	ctx := context.Background()
	svc, nodes := lbService("web"), lbNodes(4)
	if _, err := lbs.EnsureLoadBalancer(ctx, "budget", svc, nodes[:3]); err != nil {
		t.Fatal(err)
	}
	svc = svc.DeepCopy()
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, NodePort: 30443})
	moved := nodes[1:] // node-0 leaves, node-3 joins
	emu.ResetRequests()
	_, err := lbs.EnsureLoadBalancer(ctx, "budget", svc, moved)
	if !errors.Is(err, policy.ErrDenied) || !strings.Contains(err.Error(), "applied: remove_target(server:1), add_target(server:4); denied: port 443 is not allowed (no443): for add_service(443)") {
		t.Fatalf("EnsureLoadBalancer = %v, want the targets applied and add_service(443) denied", err)
	}
	c := emu.Counts()
	if c["POST /v1/load_balancers/{id}/actions/add_service"] != 0 || c["POST /v1/load_balancers/{id}/actions/add_target"] != 1 ||
		c["POST /v1/load_balancers/{id}/actions/remove_target"] != 1 || emu.MutatingRequests() != 2 {
		t.Errorf("requests %v, want one remove_target and one add_target, nothing for the listener", c)
	}
	lb := emu.LoadBalancers()[0]
	var targets []int64
	for _, tg := range lb.Targets {
		targets = append(targets, tg.Server.ID)
	}
	if want := []int64{2, 3, 4}; fmt.Sprint(targets) != fmt.Sprint(want) || len(lb.Services) != 1 {
		t.Errorf("targets %v and %d listeners, want %v and 1", targets, len(lb.Services), want)
	}
	// The Ensure retries hit the remembered denial; the node sync's Update plans from the
	// cached load balancer, which holds what the allowed steps left: only add_service(443) is
	// left, denied again without a request, and then remembered too.
	for round := range 3 {
		emu.ResetRequests()
		_, err := lbs.EnsureLoadBalancer(ctx, "budget", svc, moved)
		if !errors.Is(err, policy.ErrDenied) || !strings.HasPrefix(err.Error(), "1 of 1 changes denied, nothing changed: port 443 is not allowed") {
			t.Fatalf("retry %d: %v, want add_service(443) denied alone, nothing changed", round+1, err)
		}
		if got := total(emu.Counts()); got != 0 {
			t.Errorf("retry %d of the unchanged Service: %d requests, want 0 (%v)", round+1, got, emu.Counts())
		}
	}
	for round := range 3 {
		emu.ResetRequests()
		if err := lbs.UpdateLoadBalancer(ctx, "budget", svc, moved); !errors.Is(err, policy.ErrDenied) || !strings.HasPrefix(err.Error(), "1 of 1 changes denied, nothing changed") {
			t.Fatalf("node sync %d: %v, want add_service(443) denied alone", round+1, err)
		}
		if got := total(emu.Counts()); got != 0 {
			t.Errorf("node sync %d of the unchanged Service: %d requests, want 0 (%v)", round+1, got, emu.Counts())
		}
	}
}

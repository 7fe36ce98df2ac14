//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// fiveRules is issue 20's policy, as a policy author wrote it from docs/policy.md. The port
// rule matches loadbalancer.create only: before a create's decision showed what its request
// carries, it passed its tests and never fired (default/ssh was created with port 22).
const fiveRules = `package ccm

# 1. No SSH through a new load balancer.
deny contains {"msg": msg, "code": "port_22_on_create"} if {
	input.action == "loadbalancer.create"
	some svc in input.load_balancer.services
	svc.listen_port == 22
	msg := sprintf("load balancer %s would listen on port 22", [input.load_balancer.name])
}

# 2. No SSH added to an existing load balancer.
deny contains {"msg": "port 22 added to a load balancer", "code": "port_22_added"} if {
	input.operation == "add_service"
	input.listener.listen_port == 22
}

# 3. Small types only.
deny contains {"msg": "type not allowed", "code": "type"} if {
	input.action in {"loadbalancer.create", "loadbalancer.update"}
	not input.load_balancer.type in {"lb11", "lb21"}
}

# 4. Falkenstein only.
deny contains {"msg": "location not allowed", "code": "location"} if {
	input.action == "loadbalancer.create"
	input.load_balancer.location != "fsn1"
}

# 5. Plain HTTP is reported.
warn contains "port 80 without 443" if {
	input.action == "loadbalancer.create"
	ports := {svc.listen_port | some svc in input.load_balancer.services}
	80 in ports
	not 443 in ports
}
`

// TestCCMDeniesPort22OnCreate is issue 20's five-rule scenario end to end: a rule on
// loadbalancer.create and the listener port denies the create of a Service with port 22 (a
// PolicyDenied event naming the rule's message, and not one POST /load_balancers reaches
// Hetzner), while a Service on port 80 under the same policy gets its load balancer.
func TestCCMDeniesPort22OnCreate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "five.rego"), []byte(fiveRules), 0o644); err != nil {
		t.Fatal(err)
	}
	c, emu, endpoint, id := oneWorker(t, "10.244.1.0/24")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{
		// The five rules instead of deploy/'s ConfigMap: one policy source only.
		args: []string{"--policy-configmap=", "--policy-dir=" + dir, "--policy-mode=enforce"},
		env:  []string{"HCLOUD_LOAD_BALANCERS_LOCATION=fsn1", "HCLOUD_LOAD_BALANCERS_TYPE=lb11"},
	})
	waitInitialised(t, c, ccm, "worker-1", id)
	emu.ResetRequests()

	ctx := context.Background()
	admin := c.Client()
	ssh := loadBalancerService("default", "ssh")
	ssh.Spec.Ports = []corev1.ServicePort{{Name: "ssh", Port: 22}}
	if _, err := admin.CoreV1().Services("default").Create(ctx, ssh, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service default/ssh: %v", err)
	}
	var denial string
	harness.WaitFor(t, time.Minute, func() (bool, error) {
		events, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.name": "ssh", "reason": "PolicyDenied",
		}.String()})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, "would listen on port 22") {
				denial = ev.Message
				return true, nil
			}
		}
		return false, fmt.Errorf("no PolicyDenied event about port 22 on default/ssh yet (%d events)", len(events.Items))
	})
	t.Logf("PolicyDenied: %s", denial)
	if !strings.Contains(denial, "(port_22_on_create): for create(") {
		t.Errorf("PolicyDenied = %q, want the create named", denial)
	}
	if n := emu.Counts()["POST /v1/load_balancers"]; n != 0 {
		t.Errorf("%d POST /load_balancers after the denial, want 0: %v", n, emu.Counts())
	}
	if n := emu.MutatingRequests(); n != 0 {
		t.Errorf("%d mutating Hetzner requests after the denial, want 0: %v", n, emu.Counts())
	}

	if _, err := admin.CoreV1().Services("default").Create(ctx, loadBalancerService("default", "web"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service default/web: %v", err)
	}
	harness.WaitFor(t, 2*time.Minute, func() (bool, error) {
		svc, err := admin.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(svc.Status.LoadBalancer.Ingress) > 0, fmt.Errorf("service default/web has no ingress yet")
	})
	if n := emu.Counts()["POST /v1/load_balancers"]; n != 1 {
		t.Errorf("%d POST /load_balancers, want 1 (default/web's)", n)
	}
	for _, lb := range emu.LoadBalancers() {
		for _, s := range lb.Services {
			if s.ListenPort == 22 {
				t.Errorf("load balancer %s listens on port 22", lb.Name)
			}
		}
	}
}

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// no443Rule denies the listener on port 443, and nothing else.
const no443Rule = `package ccm

deny contains {"msg": "port 443 is closed", "code": "no443"} if {
	input.operation == "add_service"
	input.listener.listen_port == 443
}
`

// TestCCMStepsFailAlone is issue 29's scenario: the policy denies add_service(443) on a live
// load balancer while one node joins and one leaves. The denied listener holds no target
// hostage: both target changes land, no request goes for the listener, and the PolicyDenied
// events name what was applied and what was denied.
func TestCCMStepsFailAlone(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id1 := oneWorker(t, "10.244.1.0/24")
	id2 := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-2"})
	id3 := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-3"})
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{env: lbEnv, args: []string{enforce}})
	waitInitialised(t, c, ccm, "worker-1", id1)
	createNodeLive(t, c, "worker-2", "10.244.2.0/24", "worker-1")
	waitInitialised(t, c, ccm, "worker-2", id2)
	state := func(ports []int, ids ...int64) func(schema.LoadBalancer) error {
		return func(lb schema.LoadBalancer) error {
			var got []int
			for _, s := range lb.Services {
				got = append(got, s.ListenPort)
			}
			if slices.Sort(got); !slices.Equal(got, ports) || !slices.Equal(targetServers(lb), ids) {
				return fmt.Errorf("listeners %v and targets %v, want %v and %v", got, targetServers(lb), ports, ids)
			}
			return nil
		}
	}

	const ns = "default"
	web := createService(t, c, loadBalancerService(ns, "web"))
	waitLB(t, ccm, emu, web.UID, time.Minute, state([]int{80}, id1, id2))
	updatePolicies(t, c, ccm, func(data map[string]string) { data["no443.rego"] = no443Rule })
	emu.ResetRequests()
	updateService(t, c, ns, web.Name, func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443})
	})
	waitEvent(t, c, ccm, ns, web.Name, corev1.EventTypeWarning, "PolicyDenied", "add_service(443)")

	if err := c.Client().CoreV1().Nodes().Delete(context.Background(), "worker-2", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete node worker-2: %v", err)
	}
	createNodeLive(t, c, "worker-3", "10.244.3.0/24", "worker-1")
	waitInitialised(t, c, ccm, "worker-3", id3)
	waitLB(t, ccm, emu, web.UID, 2*time.Minute, state([]int{80}, id1, id3))

	if n := emu.Counts()["POST /v1/load_balancers/{id}/actions/add_service"]; n != 0 {
		t.Errorf("%d add_service requests while port 443 is denied, want 0 (%v)", n, emu.Counts())
	}
	// Each sync's event names what it applied and the denial; one sync may carry both target
	// changes, or the leave and the join may come in two.
	removed, added := fmt.Sprintf("remove_target(server:%d)", id2), fmt.Sprintf("add_target(server:%d)", id3)
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		evs, err := events(c, ns, web.Name, "PolicyDenied")
		if err != nil {
			return false, err
		}
		var applied []string
		for _, e := range evs {
			if !strings.HasPrefix(e.Message, "applied: ") {
				continue
			}
			if !strings.Contains(e.Message, "; denied: port 443 is closed (no443): for add_service(443) (decision ") {
				t.Fatalf("a PolicyDenied event that applied steps does not name the denial: %q", e.Message)
			}
			applied = append(applied, e.Message)
		}
		all := strings.Join(applied, "\n")
		if strings.Contains(all, removed) && strings.Contains(all, added) {
			t.Logf("PolicyDenied events naming applied steps:\n%s", all)
			return true, nil
		}
		return false, fmt.Errorf("PolicyDenied events naming applied steps %q, want %s and %s", applied, removed, added)
	})
}

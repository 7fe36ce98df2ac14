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
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// Helpers of the load balancer, lifecycle, policy reload, dry-run and naming scenarios.

const (
	// labelServiceUID is the label that identifies the load balancer of a Service (the same as
	// the official CCM's).
	labelServiceUID = "hcloud-ccm/service-uid"
	// finalizerLBCleanup is the finalizer the service controller puts on a Service with a load
	// balancer, and removes once the load balancer is deleted.
	finalizerLBCleanup = "service.kubernetes.io/load-balancer-cleanup"
	// annotationPrefix is the prefix of the official CCM's Service annotations.
	annotationPrefix = "load-balancer.hetzner.cloud/"
)

// lbEnv are the load balancer defaults of the scenarios (as in TestCCMPolicyGate): a location
// the example policies allow and the smallest type.
var lbEnv = []string{"HCLOUD_LOAD_BALANCERS_LOCATION=fsn1", "HCLOUD_LOAD_BALANCERS_TYPE=lb11"}

// waitCCM is harness.WaitFor that fails at once when ccm exits meanwhile.
func waitCCM(t *testing.T, ccm *harness.Process, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	harness.WaitFor(t, timeout, func() (bool, error) {
		if exited, err := ccm.Exited(); exited {
			t.Fatalf("%s exited (%v)", ccm.Name, err)
		}
		return cond()
	})
}

// events returns the events of the object name in namespace with the given reason.
func events(c *harness.Cluster, namespace, name, reason string) ([]corev1.Event, error) {
	list, err := c.Client().CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.name": name, "reason": reason,
	}.String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// waitEvent waits for an event of type typ and reason on the object name in namespace whose
// message contains substr, and returns it.
func waitEvent(t *testing.T, c *harness.Cluster, ccm *harness.Process, namespace, name, typ, reason, substr string) corev1.Event {
	t.Helper()
	var found corev1.Event
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		evs, err := events(c, namespace, name, reason)
		if err != nil {
			return false, err
		}
		var msgs []string
		for _, ev := range evs {
			if ev.Type == typ && strings.Contains(ev.Message, substr) {
				found = ev
				return true, nil
			}
			msgs = append(msgs, ev.Type+": "+ev.Message)
		}
		return false, fmt.Errorf("no %s event %s containing %q on %s/%s yet; have %q", typ, reason, substr, namespace, name, msgs)
	})
	return found
}

// createService creates svc and returns it as stored (with its UID and node ports).
func createService(t *testing.T, c *harness.Cluster, svc *corev1.Service) *corev1.Service {
	t.Helper()
	created, err := c.Client().CoreV1().Services(svc.Namespace).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service %s/%s: %v", svc.Namespace, svc.Name, err)
	}
	return created
}

// updateService applies mutate to the current Service and updates it, retrying on conflicts
// (the CCM writes the status and the finalizer meanwhile), and returns it as stored.
func updateService(t *testing.T, c *harness.Cluster, namespace, name string, mutate func(*corev1.Service)) *corev1.Service {
	t.Helper()
	services := c.Client().CoreV1().Services(namespace)
	var updated *corev1.Service
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc, err := services.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		if svc.Labels == nil {
			svc.Labels = map[string]string{}
		}
		mutate(svc)
		updated, err = services.Update(context.Background(), svc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update service %s/%s: %v", namespace, name, err)
	}
	return updated
}

// getService returns the Service as stored.
func getService(t *testing.T, c *harness.Cluster, namespace, name string) *corev1.Service {
	t.Helper()
	svc, err := c.Client().CoreV1().Services(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get service %s/%s: %v", namespace, name, err)
	}
	return svc
}

// serviceLBs returns the load balancers in the emulator labelled with the Service's UID.
func serviceLBs(emu *hcloudemu.Emulator, uid types.UID) []schema.LoadBalancer {
	var out []schema.LoadBalancer
	for _, lb := range emu.LoadBalancers() {
		if lb.Labels[labelServiceUID] == string(uid) {
			out = append(out, lb)
		}
	}
	return out
}

// waitLB waits until the emulator holds exactly one load balancer of the Service with UID uid,
// and cond (nil: none) accepts it, and returns it. More than one load balancer for the Service
// fails the test at once (a duplicate).
func waitLB(t *testing.T, ccm *harness.Process, emu *hcloudemu.Emulator, uid types.UID, timeout time.Duration, cond func(schema.LoadBalancer) error) schema.LoadBalancer {
	t.Helper()
	var lb schema.LoadBalancer
	waitCCM(t, ccm, timeout, func() (bool, error) {
		lbs := serviceLBs(emu, uid)
		switch len(lbs) {
		case 0:
			return false, fmt.Errorf("no load balancer labelled %s=%s yet", labelServiceUID, uid)
		case 1:
		default:
			t.Fatalf("%d load balancers labelled %s=%s, want 1: %v", len(lbs), labelServiceUID, uid, lbNames(lbs))
		}
		lb = lbs[0]
		if cond == nil {
			return true, nil
		}
		if err := cond(lb); err != nil {
			return false, fmt.Errorf("load balancer %d (%s): %w", lb.ID, lb.Name, err)
		}
		return true, nil
	})
	return lb
}

// lbNames lists "id:name" of lbs, for messages.
func lbNames(lbs []schema.LoadBalancer) []string {
	var out []string
	for _, lb := range lbs {
		out = append(out, fmt.Sprintf("%d:%s", lb.ID, lb.Name))
	}
	return out
}

// listeners returns "listen->destination" of the load balancer's services, sorted.
func listeners(lb schema.LoadBalancer) []string {
	var out []string
	for _, s := range lb.Services {
		out = append(out, fmt.Sprintf("%s/%d->%d", s.Protocol, s.ListenPort, s.DestinationPort))
	}
	slices.Sort(out)
	return out
}

// wantListeners returns the listeners a Service's ports should give: tcp, port to node port.
func wantListeners(svc *corev1.Service) []string {
	var out []string
	for _, p := range svc.Spec.Ports {
		out = append(out, fmt.Sprintf("tcp/%d->%d", p.Port, p.NodePort))
	}
	slices.Sort(out)
	return out
}

// targetServers returns the server IDs of the load balancer's server targets, sorted.
func targetServers(lb schema.LoadBalancer) []int64 {
	var out []int64
	for _, target := range lb.Targets {
		if target.Type == "server" && target.Server != nil {
			out = append(out, target.Server.ID)
		}
	}
	slices.Sort(out)
	return out
}

// waitIngress waits until the Service's status has a load balancer ingress, and returns it.
func waitIngress(t *testing.T, c *harness.Cluster, ccm *harness.Process, namespace, name string) []corev1.LoadBalancerIngress {
	t.Helper()
	var ingress []corev1.LoadBalancerIngress
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		svc, err := c.Client().CoreV1().Services(namespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ingress = svc.Status.LoadBalancer.Ingress
		return len(ingress) > 0, fmt.Errorf("service %s/%s has no ingress yet", namespace, name)
	})
	return ingress
}

// ingressIPs returns the IPs of the ingress entries.
func ingressIPs(ingress []corev1.LoadBalancerIngress) []string {
	var out []string
	for _, in := range ingress {
		out = append(out, in.IP)
	}
	return out
}

// addServer adds a server to the emulator, failing the test on error.
func addServer(t *testing.T, emu *hcloudemu.Emulator, spec hcloudemu.ServerSpec) int64 {
	t.Helper()
	id, err := emu.AddServer(spec)
	if err != nil {
		t.Fatalf("add server %s: %v", spec.Name, err)
	}
	return id
}

// createNodeLive registers a Node like harness.CreateNode, for a cluster where a CCM already
// runs: the CCM may initialise the Node between its creation and the status write, so the
// status write (a copy of the kubelet status of the registered node like, with only the
// Hostname address) is retried on conflicts, as a kubelet does. The Node is deleted when t ends.
func createNodeLive(t *testing.T, c *harness.Cluster, name, podCIDR, like string) {
	t.Helper()
	ctx := context.Background()
	nodes := c.Client().CoreV1().Nodes()
	ref, err := nodes.Get(ctx, like, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node %s: %v", like, err)
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		Spec: corev1.NodeSpec{
			PodCIDR:  podCIDR,
			PodCIDRs: []string{podCIDR},
			Taints:   []corev1.Taint{{Key: harness.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	if _, err := nodes.Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	t.Cleanup(func() { _ = nodes.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status.Capacity = ref.Status.Capacity
		cur.Status.Allocatable = ref.Status.Allocatable
		cur.Status.NodeInfo = ref.Status.NodeInfo
		cur.Status.Conditions = nil
		for _, cond := range ref.Status.Conditions {
			cond.LastHeartbeatTime, cond.LastTransitionTime = now, now
			cur.Status.Conditions = append(cur.Status.Conditions, cond)
		}
		if len(cur.Status.Addresses) == 0 {
			cur.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}}
		}
		_, err = nodes.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update status of node %s: %v", name, err)
	}
}

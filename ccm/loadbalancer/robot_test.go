package loadbalancer_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/robot"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/robotemu"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

func robotNode(name, providerID, internalIP string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	if internalIP != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: internalIP}}
	}
	return n
}

// ipTargetsOf returns the IP targets of lb, sorted.
func ipTargetsOf(lb *hcloud.LoadBalancer) []string {
	var out []string
	for _, t := range lb.Targets {
		if t.Type == hcloud.LoadBalancerTargetTypeIP {
			out = append(out, t.IP.IP)
		}
	}
	slices.Sort(out)
	return out
}

func TestEnsureLoadBalancer_robotIPTargets(t *testing.T) {
	ev := newEnv(t)
	remu, endpoint := robotemu.NewTestServer(t, robotemu.Seed{Servers: []robotemu.Server{
		{Number: 321, Name: "bm-1", IP: "203.0.113.50"}, {Number: 322, Name: "bm-2", IP: "203.0.113.51"},
	}})
	rc, err := robot.New(robot.Options{Config: config.Robot{User: remu.User(), Password: remu.Password(), CacheTimeout: time.Minute, Endpoint: endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	lbs := newLoadBalancers(t, loadbalancer.Options{Readers: ev.readers(), Executor: ev.exec, Config: config.LoadBalancer{Location: "fsn1", Type: "lb11"},
		Recorder: ev.recorder, Robot: true, RobotClient: rc})
	ensure := func(nodes ...*corev1.Node) *hcloud.LoadBalancer {
		t.Helper()
		if _, err := lbs.EnsureLoadBalancer(context.Background(), clusterName, newService("web", withPorts(80)), append(slices.Clone(ev.nodes), nodes...)); err != nil {
			t.Fatalf("EnsureLoadBalancer: %v", err)
		}
		return ev.onlyLB()
	}

	lb := ensure(robotNode("bm-1", "hrobot://321", "10.1.0.1"), robotNode("bm-2", "hcloud://bm-322", ""), robotNode("bm-9", "hrobot://999", ""))
	if got := ipTargetsOf(lb); !slices.Equal(got, []string{"203.0.113.50", "203.0.113.51"}) {
		t.Errorf("IP targets = %v, want both Robot servers' server_ip (hrobot:// and the legacy hcloud://bm-)", got)
	}
	if len(lb.Targets) != 4 {
		t.Errorf("%d targets, want 2 servers and 2 IPs", len(lb.Targets))
	}
	if events := ev.events(); !hasEvent(events, "Warning ServerNotFound No server with id 999 was found in Robot") {
		t.Errorf("events %q, want ServerNotFound for bm-9", events)
	}
	var ipInputs []input.LBTarget
	for _, in := range ev.decider.inputs {
		if in.Operation == "add_target" && in.Target != nil && in.Target.Type == "ip" {
			ipInputs = append(ipInputs, *in.Target)
		}
	}
	if len(ipInputs) != 2 || ipInputs[0].IP != "203.0.113.50" {
		t.Errorf("policy inputs of IP add_targets = %+v, want the two Robot IPs as input.target", ipInputs)
	}

	// bm-2 left the cluster: its IP target is stale and removed.
	lb = ensure(robotNode("bm-1", "hrobot://321", "10.1.0.1"))
	if got := ipTargetsOf(lb); !slices.Equal(got, []string{"203.0.113.50"}) {
		t.Errorf("IP targets after bm-2 left = %v, want [203.0.113.50]", got)
	}
	if n := remu.Requests()["GET /server"]; n != 1 {
		t.Errorf("GET /server = %d, want 1 (the Robot list is cached)", n)
	}

	// An IP target policy deny stops the plan.
	ev.decider.set(false, "add_target")
	if _, err := lbs.EnsureLoadBalancer(context.Background(), clusterName, newService("web", withPorts(80)),
		append(slices.Clone(ev.nodes), robotNode("bm-1", "hrobot://321", ""), robotNode("bm-2", "hrobot://322", ""))); err == nil {
		t.Error("EnsureLoadBalancer succeeded although add_target is denied")
	}
	if got := ipTargetsOf(ev.onlyLB()); !slices.Equal(got, []string{"203.0.113.50"}) {
		t.Errorf("IP targets after a denied add = %v, want [203.0.113.50]", got)
	}
}

func TestEnsureLoadBalancer_robotWithoutCredentials(t *testing.T) {
	ev := newEnv(t)
	lbs := newLoadBalancers(t, loadbalancer.Options{Readers: ev.readers(), Executor: ev.exec, Config: config.LoadBalancer{Location: "fsn1", Type: "lb11"},
		Recorder: ev.recorder, Robot: true})
	if _, err := lbs.EnsureLoadBalancer(context.Background(), clusterName, newService("web", withPorts(80)),
		append(slices.Clone(ev.nodes), robotNode("bm-1", "hrobot://321", "10.1.0.1"))); err != nil {
		t.Fatal(err)
	}
	if got := ipTargetsOf(ev.onlyLB()); len(got) != 0 {
		t.Errorf("IP targets = %v, want none (public targets need the Robot API)", got)
	}
	if events := ev.events(); !hasEvent(events, "Warning ServerNotFound No server with id 321 was found in Robot") {
		t.Errorf("events %q, want ServerNotFound for bm-1", events)
	}
}

func TestEnsureLoadBalancer_robotOff(t *testing.T) {
	ev := newEnv(t)
	ev.nodes = append(ev.nodes, robotNode("bm-1", "hrobot://321", "10.1.0.1"))
	ev.mustEnsure(newService("web", withPorts(80)))
	if got := ipTargetsOf(ev.onlyLB()); len(got) != 0 {
		t.Errorf("IP targets = %v, want none without Robot", got)
	}
	if events := ev.events(); hasEvent(events, "Warning UnknownProviderIDPrefix") || hasEvent(events, "Warning ServerNotFound") {
		t.Errorf("events %q: a Robot node is skipped without an event while Robot is off (official)", events)
	}
}

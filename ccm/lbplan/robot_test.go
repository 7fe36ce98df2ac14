package lbplan_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// withRobot adds a Robot node bm-<number> to the input.
func withRobot(n lbplan.RobotNode, labels ...string) inputTweak {
	return func(in *lbservice.DesiredInput) {
		l := map[string]string{}
		for i := 0; i+1 < len(labels); i += 2 {
			l[labels[i]] = labels[i+1]
		}
		in.Nodes = append(in.Nodes, lbplan.Node{Name: "bm-" + string(rune('0'+n.Number%10)), Labels: l, Robot: &n})
	}
}

func ipTarget(ip string) hcloud.LoadBalancerTarget {
	return hcloud.LoadBalancerTarget{Type: hcloud.LoadBalancerTargetTypeIP, IP: &hcloud.LoadBalancerTargetIP{IP: ip}}
}

// withTargets adds ts to the load balancer's targets.
func withTargets(ts ...hcloud.LoadBalancerTarget) lbTweak {
	return func(lb *hcloud.LoadBalancer) { lb.Targets = append(lb.Targets, ts...) }
}

// privateServers makes the server targets of node-1 and node-2 private and attaches the load
// balancer to the network.
func privateServers(lb *hcloud.LoadBalancer) {
	attached("10.0.0.9")(lb)
	lb.Targets = []hcloud.LoadBalancerTarget{serverTarget(1, true), serverTarget(2, true)}
}

func TestCompute_robotTargets(t *testing.T) {
	api := lbplan.RobotNode{Number: 1, PublicIP: "203.0.113.51", InternalIP: "10.1.0.1"}
	noInternal := lbplan.RobotNode{Number: 2, PublicIP: "203.0.113.52"}
	unlisted := lbplan.RobotNode{Number: 3, InternalIP: "10.1.0.3"}
	noAPI := lbplan.RobotNode{Number: 4, NoAPI: true, InternalIP: "10.1.0.4"}
	noAPINoInternal := lbplan.RobotNode{Number: 5, NoAPI: true}
	private := withAnnotation(annotation.LBUsePrivateIP, "true")

	tests := []struct {
		name         string
		svc          []serviceTweak
		robots       []lbplan.RobotNode
		excluded     bool // the Robot nodes carry the exclusion label
		lb           []lbTweak
		want         []string
		wantProblems []string
	}{
		{name: "a Robot node is an IP target on its Robot server_ip", robots: []lbplan.RobotNode{api},
			want: []string{"add_target(ip:203.0.113.51)"}},
		{name: "an IP target that is wanted is kept", robots: []lbplan.RobotNode{api}, lb: []lbTweak{withTargets(ipTarget("203.0.113.51"))}},
		{name: "stale IP targets are removed: a node that left, and an unknown address", robots: []lbplan.RobotNode{api},
			lb:   []lbTweak{withTargets(ipTarget("203.0.113.51"), ipTarget("203.0.113.99"), ipTarget("198.51.100.1"))},
			want: []string{"remove_target(ip:198.51.100.1)", "remove_target(ip:203.0.113.99)"}},
		{name: "with use-private-ip the node's InternalIP replaces its public IP target", svc: []serviceTweak{private},
			robots: []lbplan.RobotNode{api}, lb: []lbTweak{privateServers, withTargets(ipTarget("203.0.113.51"))},
			want: []string{"remove_target(ip:203.0.113.51)", "add_target(ip:10.1.0.1)"}},
		{name: "use-private-ip without an InternalIP falls back to the public IP with InternalIPNotConfigured", svc: []serviceTweak{private},
			robots: []lbplan.RobotNode{noInternal}, lb: []lbTweak{privateServers},
			want:         []string{"add_target(ip:203.0.113.52)"},
			wantProblems: []string{"InternalIPNotConfigured bm-2"}},
		{name: "a Robot node whose server is not in the Robot account is skipped with ServerNotFound", robots: []lbplan.RobotNode{unlisted},
			wantProblems: []string{"ServerNotFound bm-3"}},
		{name: "without Robot credentials use-private-ip targets the InternalIP", svc: []serviceTweak{private},
			robots: []lbplan.RobotNode{noAPI, noAPINoInternal}, lb: []lbTweak{privateServers},
			want: []string{"add_target(ip:10.1.0.4)"}, wantProblems: []string{"InternalIPNotConfigured bm-5"}},
		{name: "without Robot credentials a public target is ServerNotFound", robots: []lbplan.RobotNode{noAPI},
			wantProblems: []string{"ServerNotFound bm-4"}},
		{name: "the node selector applies to Robot nodes",
			svc:    []serviceTweak{withAnnotation(annotation.LBNodeSelector, "pool=web")},
			robots: []lbplan.RobotNode{api}, lb: []lbTweak{func(lb *hcloud.LoadBalancer) { lb.Targets = nil }}},
		{name: "the exclusion label applies to Robot nodes", robots: []lbplan.RobotNode{api}, excluded: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService("web", append([]serviceTweak{withPorts(80)}, tc.svc...)...)
			var tweaks []inputTweak
			if svc.Annotations[string(annotation.LBUsePrivateIP)] == "true" {
				tweaks = append(tweaks, withNetwork)
			}
			for _, r := range tc.robots {
				if tc.excluded {
					tweaks = append(tweaks, withRobot(r, lbplan.LabelExcludeFromLB, ""))
				} else {
					tweaks = append(tweaks, withRobot(r))
				}
			}
			d := mustDesired(t, newInput(svc, tweaks...))
			var problems []string
			for _, p := range d.TargetProblems {
				problems = append(problems, p.Reason+" "+p.Node)
			}
			if diff := cmp.Diff(tc.wantProblems, problems); diff != "" {
				t.Errorf("target problems (-want +got):\n%s", diff)
			}
			p, err := lbplan.Compute(d, lbplan.NewActual(newLB(tc.lb...)))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range p.Mutations {
				got = append(got, m.Label())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mutations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompute_robotTargetsCountAgainstMaxTargets(t *testing.T) {
	in := newInput(newService("web", withPorts(80)), withNodes(1),
		withRobot(lbplan.RobotNode{Number: 1, PublicIP: "203.0.113.51"}), withRobot(lbplan.RobotNode{Number: 2, PublicIP: "203.0.113.52"}))
	d := mustDesired(t, in)
	d.MaxTargets = 2
	p, err := lbplan.Compute(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range p.Mutations[1:] {
		got = append(got, m.Label())
	}
	if diff := cmp.Diff([]string{"add_service(80)", "add_target(server:1)", "add_target(ip:203.0.113.51)"}, got); diff != "" {
		t.Errorf("mutations after create (-want +got):\n%s", diff)
	}
	if len(p.SkippedIPTargets) != 1 || p.SkippedIPTargets[0].IP != "203.0.113.52" || p.SkippedIPTargets[0].Node != "bm-2" {
		t.Errorf("SkippedIPTargets = %+v, want bm-2's 203.0.113.52", p.SkippedIPTargets)
	}
}

func TestTargetMutation_PolicyTarget(t *testing.T) {
	tests := []struct {
		m    lbplan.TargetMutation
		want input.LBTarget
	}{
		{lbplan.AddIPTarget{Target: lbplan.IPTarget{IP: "203.0.113.51", Node: "bm-1"}}, input.LBTarget{Type: "ip", IP: "203.0.113.51"}},
		{lbplan.RemoveIPTarget{IP: "203.0.113.51"}, input.LBTarget{Type: "ip", IP: "203.0.113.51"}},
		{lbplan.AddTarget{Target: lbplan.Target{ServerID: 7, UsePrivateIP: true}}, input.LBTarget{Type: "server", ServerID: 7, UsePrivateIP: true}},
		{lbplan.RemoveTarget{Target: lbplan.Target{ServerID: 7}}, input.LBTarget{Type: "server", ServerID: 7}},
	}
	for _, tc := range tests {
		if got := tc.m.PolicyTarget(); got != tc.want {
			t.Errorf("%s: PolicyTarget() = %+v, want %+v", tc.m.Label(), got, tc.want)
		}
	}
}

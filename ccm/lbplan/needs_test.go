package lbplan_test

import (
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// existing is a load balancer of type lb11 (5 listeners, 3 targets at most, as set) with
// listener 80, public targets 1 and 2, attached to network 5 unless detached.
func existing(tweaks ...func(*lbplan.Actual)) *lbplan.Actual {
	a := &lbplan.Actual{
		ID: 7, Name: "web-lb", Type: "lb11", MaxTargets: 3, MaxServices: 2, PublicInterface: true,
		Services: []lbplan.Listener{{Protocol: hcloud.LoadBalancerServiceProtocolTCP, ListenPort: 80, DestinationPort: 30080}},
		Targets:  []lbplan.Target{{ServerID: 1}, {ServerID: 2}},
	}
	for _, t := range tweaks {
		t(a)
	}
	return a
}

func listener(port int, certs ...int64) lbplan.Listener {
	l := lbplan.Listener{Protocol: hcloud.LoadBalancerServiceProtocolTCP, ListenPort: port, DestinationPort: 30000 + port}
	if len(certs) > 0 {
		l.Protocol, l.HTTP.Certificates = hcloud.LoadBalancerServiceProtocolHTTPS, certs
	}
	return l
}

var network5 = lbplan.Attachment{ID: 5, IPRange: "10.0.0.0/8", IP: net.ParseIP("10.0.0.9")}

// TestPlan_Runnable is the rule "steps fail alone": a denied step skips itself and the steps
// that need it (Plan.Needs, transitively), and nothing else; a create or a delete is all or
// nothing.
func TestPlan_Runnable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		actual *lbplan.Actual
		ms     []lbplan.Mutation
		denied []int
		// runs are the labels of the plan that runs; skips "label" (denied) or
		// "label<-because" (needs a skipped step).
		runs, skips []string
	}{
		{
			name:   "a denied listener holds no target hostage: the node that joins and the one that leaves both change",
			actual: existing(),
			ms: []lbplan.Mutation{lbplan.RemoveTarget{Target: lbplan.Target{ServerID: 1}}, lbplan.AddService{Listener: listener(443)},
				lbplan.AddTarget{Target: lbplan.Target{ServerID: 3}}},
			denied: []int{1},
			runs:   []string{"remove_target(server:1)", "add_target(server:3)"},
			skips:  []string{"add_service(443)"},
		},
		{
			name:   "no denial runs the whole plan",
			actual: existing(),
			ms:     []lbplan.Mutation{lbplan.AddService{Listener: listener(443)}, lbplan.AddTarget{Target: lbplan.Target{ServerID: 3}}},
			runs:   []string{"add_service(443)", "add_target(server:3)"},
		},
		{
			name:   "a listener that uses the certificate the plan creates needs it; an unrelated update runs",
			actual: existing(),
			ms: []lbplan.Mutation{lbplan.Update{Name: "web-lb", Labels: map[string]string{"a": "b"}},
				lbplan.CreateManagedCertificate{Certificate: lbplan.ManagedCertificate{Name: "c", Domains: []string{"x.example"}}},
				lbplan.UpdateService{Listener: listener(80, lbplan.PendingCertificateID)}, lbplan.AddService{Listener: listener(443, 9)}},
			denied: []int{1},
			runs:   []string{"update(web-lb)", "add_service(443)"},
			skips:  []string{"create_managed_certificate(c)", "update_service(80)<-create_managed_certificate(c)"},
		},
		{
			name:   "a listener beyond max_services needs the type change; a target within max_targets does not",
			actual: existing(),
			ms: []lbplan.Mutation{lbplan.ChangeType{Type: "lb21"}, lbplan.AddService{Listener: listener(443)},
				lbplan.AddService{Listener: listener(8443)}, lbplan.AddTarget{Target: lbplan.Target{ServerID: 3}}},
			denied: []int{0},
			runs:   []string{"add_service(443)", "add_target(server:3)"},
			skips:  []string{"change_type(lb21)", "add_service(8443)<-change_type(lb21)"},
		},
		{
			name:   "a target beyond max_targets needs the type change",
			actual: existing(),
			ms: []lbplan.Mutation{lbplan.ChangeType{Type: "lb21"}, lbplan.AddTarget{Target: lbplan.Target{ServerID: 3}},
				lbplan.AddIPTarget{Target: lbplan.IPTarget{IP: "198.51.100.4"}}},
			denied: []int{0},
			runs:   []string{"add_target(server:3)"},
			skips:  []string{"change_type(lb21)", "add_target(ip:198.51.100.4)<-change_type(lb21)"},
		},
		{
			name:   "a listener that fits only after a delete needs the delete",
			actual: existing(func(a *lbplan.Actual) { a.Services = append(a.Services, listener(8080)) }),
			ms: []lbplan.Mutation{lbplan.DeleteService{ListenPort: 8080}, lbplan.AddService{Listener: listener(9090)},
				lbplan.AddTarget{Target: lbplan.Target{ServerID: 3}}},
			denied: []int{0},
			runs:   []string{"add_target(server:3)"},
			skips:  []string{"delete_service(8080)", "add_service(9090)<-delete_service(8080)"},
		},
		{
			name: "a target that fits only after a removal needs the removal",
			actual: existing(func(a *lbplan.Actual) {
				a.Targets = append(a.Targets, lbplan.Target{ServerID: 3})
			}),
			ms: []lbplan.Mutation{lbplan.RemoveTarget{Target: lbplan.Target{ServerID: 3}}, lbplan.AddIPTarget{Target: lbplan.IPTarget{IP: "198.51.100.4"}},
				lbplan.AddService{Listener: listener(443)}},
			denied: []int{0},
			runs:   []string{"add_service(443)"},
			skips:  []string{"remove_target(server:3)", "add_target(ip:198.51.100.4)<-remove_target(server:3)"},
		},
		{
			name:   "an unknown limit counts as exceeded",
			actual: existing(func(a *lbplan.Actual) { a.MaxTargets = 0 }),
			ms:     []lbplan.Mutation{lbplan.ChangeType{Type: "lb21"}, lbplan.AddTarget{Target: lbplan.Target{ServerID: 3}}},
			denied: []int{0},
			skips:  []string{"change_type(lb21)", "add_target(server:3)<-change_type(lb21)"},
		},
		{
			name:   "a target on a private IP needs the attachment; a public one does not",
			actual: existing(),
			ms: []lbplan.Mutation{lbplan.AttachNetwork{Network: network5}, lbplan.AddTarget{Target: lbplan.Target{ServerID: 3, UsePrivateIP: true}},
				lbplan.AddIPTarget{Target: lbplan.IPTarget{IP: "198.51.100.4"}}},
			denied: []int{0},
			runs:   []string{"add_target(ip:198.51.100.4)"},
			skips:  []string{"attach_to_network(5)", "add_target(server:3)<-attach_to_network(5)"},
		},
		{
			name:   "needs are followed transitively: a new private IP, its targets and the private-only switch",
			actual: existing(func(a *lbplan.Actual) { a.Networks = []lbplan.AttachedNetwork{{ID: 5, IP: net.ParseIP("10.0.0.8")}} }),
			ms: []lbplan.Mutation{lbplan.DetachNetwork{NetworkID: 5}, lbplan.AttachNetwork{Network: network5},
				lbplan.RemoveTarget{Target: lbplan.Target{ServerID: 1}}, lbplan.RemoveTarget{Target: lbplan.Target{ServerID: 2}},
				lbplan.AddTarget{Target: lbplan.Target{ServerID: 1, UsePrivateIP: true}}, lbplan.DisablePublicInterface{}},
			denied: []int{0},
			runs:   []string{"remove_target(server:1)", "remove_target(server:2)"},
			skips: []string{"detach_from_network(5)", "attach_to_network(5)<-detach_from_network(5)",
				"add_target(server:1)<-attach_to_network(5)", "disable_public_interface<-attach_to_network(5)"},
		},
		{
			name:   "a target whose use_private_ip flips is added again only after its removal",
			actual: existing(func(a *lbplan.Actual) { a.Networks = []lbplan.AttachedNetwork{{ID: 5, IP: net.ParseIP("10.0.0.8")}} }),
			ms: []lbplan.Mutation{lbplan.RemoveTarget{Target: lbplan.Target{ServerID: 1}}, lbplan.RemoveTarget{Target: lbplan.Target{ServerID: 2}},
				lbplan.AddTarget{Target: lbplan.Target{ServerID: 1, UsePrivateIP: true}}, lbplan.AddTarget{Target: lbplan.Target{ServerID: 2, UsePrivateIP: true}},
				lbplan.DisablePublicInterface{}},
			denied: []int{0},
			runs:   []string{"remove_target(server:2)", "add_target(server:2)"},
			skips: []string{"remove_target(server:1)", "add_target(server:1)<-remove_target(server:1)",
				"disable_public_interface<-remove_target(server:1)"},
		},
		{
			name: "the public interface is needed by public targets, a detach and rDNS",
			actual: existing(func(a *lbplan.Actual) {
				a.PublicInterface, a.Targets = false, nil
				a.Networks = []lbplan.AttachedNetwork{{ID: 6}}
			}),
			ms: []lbplan.Mutation{lbplan.ChangeAlgorithm{Algorithm: hcloud.LoadBalancerAlgorithmTypeLeastConnections}, lbplan.EnablePublicInterface{},
				lbplan.DetachNetwork{NetworkID: 6}, lbplan.ChangeDNSPtr{Ptr: "lb.example.com"}, lbplan.AddTarget{Target: lbplan.Target{ServerID: 3}}},
			denied: []int{1},
			runs:   []string{"change_algorithm(least_connections)"},
			skips: []string{"enable_public_interface", "detach_from_network(6)<-enable_public_interface",
				"change_dns_ptr(ipv4)<-enable_public_interface", "add_target(server:3)<-enable_public_interface"},
		},
		{
			name:   "a create is all or nothing: a denied listener that rides along skips the create and what follows",
			ms:     []lbplan.Mutation{lbplan.Create{Name: "web-lb", Location: "fsn1", PublicInterface: true}, lbplan.AddService{Listener: listener(443)}, lbplan.ChangeDNSPtr{Ptr: "lb.example.com"}},
			denied: []int{0},
			skips:  []string{"create(web-lb)", "change_dns_ptr(ipv4)<-"},
		},
		{
			name:   "a delete is all or nothing",
			actual: existing(),
			ms:     []lbplan.Mutation{lbplan.Delete{Name: "web-lb"}},
			denied: []int{0},
			skips:  []string{"delete(web-lb)"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := lbplan.Plan{Actual: tc.actual, Mutations: tc.ms}
			run, skips := p.Runnable(tc.denied)
			steps := p.Steps()
			var gotSkips []string
			for _, s := range skips {
				label := steps[s.Step].Label()
				if !s.Denied {
					label += "<-" + s.Because
				}
				gotSkips = append(gotSkips, label)
			}
			if diff := cmp.Diff(tc.runs, run.Labels(), cmpNilEmpty); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.skips, gotSkips, cmpNilEmpty); diff != "" {
				t.Errorf("skips (-want +got):\n%s", diff)
			}
			if run.Actual != p.Actual {
				t.Error("the plan that runs starts from another load balancer")
			}
		})
	}
}

// cmpNilEmpty compares a nil and an empty slice as equal.
var cmpNilEmpty = cmp.FilterValues(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Comparer(func(a, b []string) bool { return true }))

// TestPlan_NeedsPointBackwards: every need of a computed plan is on an earlier step, with a
// reason, so Runnable settles a step before the steps that need it.
func TestPlan_NeedsPointBackwards(t *testing.T) {
	t.Parallel()
	p := lbplan.Plan{Actual: existing(), Mutations: []lbplan.Mutation{
		lbplan.ChangeType{Type: "lb21"}, lbplan.EnablePublicInterface{}, lbplan.AttachNetwork{Network: network5},
		lbplan.RemoveTarget{Target: lbplan.Target{ServerID: 1}},
		lbplan.CreateManagedCertificate{Certificate: lbplan.ManagedCertificate{Name: "c", Domains: []string{"x.example"}}},
		lbplan.AddService{Listener: listener(443, lbplan.PendingCertificateID)}, lbplan.AddService{Listener: listener(8443)},
		lbplan.AddTarget{Target: lbplan.Target{ServerID: 1, UsePrivateIP: true}}, lbplan.AddTarget{Target: lbplan.Target{ServerID: 3}},
		lbplan.AddTarget{Target: lbplan.Target{ServerID: 4}}, lbplan.DisablePublicInterface{},
	}}
	needs := p.Needs()
	if len(needs) < 8 {
		t.Fatalf("found %d needs, want every kind: %+v", len(needs), needs)
	}
	for _, n := range needs {
		if n.On >= n.Step || strings.TrimSpace(n.Why) == "" {
			t.Errorf("need %+v: must be on an earlier step, with a reason", n)
		}
	}
}

package lbplan_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
)

func TestPlan_Requests(t *testing.T) {
	web := func(tweaks ...serviceTweak) *corev1.Service {
		return newService("web", append([]serviceTweak{withPorts(80)}, tweaks...)...)
	}
	managed := []serviceTweak{
		withAnnotation(annotation.LBSvcProtocol, "https"), withAnnotation(annotation.LBSvcHTTPCertificateType, "managed"),
		withAnnotation(annotation.LBSvcHTTPManagedCertificateDomains, "example.com"), withAnnotation(annotation.LBSvcHTTPManagedCertificateName, "web-cert"),
	}
	tests := []struct {
		name   string
		in     lbservice.DesiredInput
		actual *hcloud.LoadBalancer
		want   [][]string // the labels of each request: its mutation, then what rides along
	}{
		{
			name: "a new service is one create carrying its listener and targets",
			in:   newInput(web()),
			want: [][]string{{"create(web-lb)", "add_service(80)", "add_target(server:1)", "add_target(server:2)"}},
		},
		{
			name: "a new service in a network carries its private targets, the network attached at create",
			in:   newInput(web(withAnnotation(annotation.LBUsePrivateIP, "true")), withNetwork),
			want: [][]string{{"create(web-lb)", "add_service(80)", "add_target(server:1)", "add_target(server:2)"}},
		},
		{
			name: "a private-only load balancer created in the network carries its private targets",
			in: newInput(web(withAnnotation(annotation.LBUsePrivateIP, "true"), withAnnotation(annotation.LBDisablePublicNetwork, "true")),
				withNetwork),
			want: [][]string{{"create(web-lb)", "add_service(80)", "add_target(server:1)", "add_target(server:2)"}},
		},
		{
			name: "a fixed private IP attaches after the create, and private targets follow the attachment",
			in: newInput(web(withAnnotation(annotation.LBUsePrivateIP, "true"), withAnnotation(annotation.LBPrivateIPv4, "10.0.0.9")),
				withNetwork),
			want: [][]string{
				{"create(web-lb)", "add_service(80)"}, {"attach_to_network(5)"},
				{"add_target(server:1)"}, {"add_target(server:2)"},
			},
		},
		{
			name: "a private-only load balancer with a fixed IP disables its public interface last",
			in: newInput(web(withAnnotation(annotation.LBUsePrivateIP, "true"), withAnnotation(annotation.LBPrivateIPv4, "10.0.0.9"),
				withAnnotation(annotation.LBDisablePublicNetwork, "true")), withNetwork),
			want: [][]string{
				{"create(web-lb)", "add_service(80)"}, {"attach_to_network(5)"},
				{"add_target(server:1)"}, {"add_target(server:2)"}, {"disable_public_interface"},
			},
		},
		{
			name: "a fixed private IP still carries the public targets",
			in:   newInput(web(withAnnotation(annotation.LBPrivateIPv4, "10.0.0.9")), withNetwork),
			want: [][]string{{"create(web-lb)", "add_service(80)", "add_target(server:1)", "add_target(server:2)"}, {"attach_to_network(5)"}},
		},
		{
			name: "rDNS records are set after the create, which gives the addresses",
			in:   newInput(web(withAnnotation(annotation.LBPublicIPv4RDNS, "lb.example.com"), withAnnotation(annotation.LBPublicIPv6RDNS, "lb6.example.com"))),
			want: [][]string{
				{"create(web-lb)", "add_service(80)", "add_target(server:1)", "add_target(server:2)"},
				{"change_dns_ptr(ipv4)"}, {"change_dns_ptr(ipv6)"},
			},
		},
		{
			name: "a managed certificate is created before the create that carries its listener",
			in:   newInput(newService("web", append([]serviceTweak{withPorts(443)}, managed...)...), withNodes(1)),
			want: [][]string{{"create_managed_certificate(web-cert)"}, {"create(web-lb)", "add_service(443)", "add_target(server:1)"}},
		},
		{
			name: "a new service without nodes is a create alone",
			in:   newInput(web(), withNodes()),
			want: [][]string{{"create(web-lb)", "add_service(80)"}},
		},
		{
			name:   "changes to an existing load balancer are one request each, in plan order",
			in:     newInput(web(withAnnotation(annotation.LBAlgorithmType, "least_connections")), withNodes(1, 3)),
			actual: newLB(),
			want:   [][]string{{"change_algorithm(least_connections)"}, {"remove_target(server:2)"}, {"add_target(server:3)"}},
		},
		{
			name:   "an unchanged load balancer is no request",
			in:     newInput(web()),
			actual: newLB(),
			want:   nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := lbplan.Compute(mustDesired(t, tc.in), lbplan.NewActual(tc.actual))
			if err != nil {
				t.Fatal(err)
			}
			var got [][]string
			for _, r := range p.Requests() {
				got = append(got, r.Labels())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			// One decision per request, with the same mutations riding along.
			steps := map[string][]string{}
			for _, st := range p.Steps() {
				labels := []string{st.Label()}
				for _, m := range st.Inline {
					labels = append(labels, m.Label())
				}
				steps[st.Label()] = labels
			}
			if len(steps) != len(got) {
				t.Errorf("%d policy steps for %d requests", len(steps), len(got))
			}
			for _, req := range got {
				if diff := cmp.Diff(req, steps[req[0]]); diff != "" {
					t.Errorf("step of request %s (-want +got):\n%s", req[0], diff)
				}
			}
		})
	}
}

func TestRequest_Split(t *testing.T) {
	p, err := lbplan.Compute(mustDesired(t, newInput(newService("web", withPorts(80)), withNodes(1))), nil)
	if err != nil {
		t.Fatal(err)
	}
	reqs := p.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	var got [][]string
	for _, r := range reqs[0].Split() {
		got = append(got, r.Labels())
	}
	want := [][]string{{"create(web-lb)"}, {"add_service(80)"}, {"add_target(server:1)"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("split (-want +got):\n%s", diff)
	}
}

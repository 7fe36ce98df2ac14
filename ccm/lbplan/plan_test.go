package lbplan_test

import (
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

const uid = "5f0c6a1e-0d7b-4b0e-9a53-1a2b3c4d5e6f"

type serviceTweak func(*corev1.Service)

func newService(name string, tweaks ...serviceTweak) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID(uid), Annotations: map[string]string{}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
	}
	for _, t := range tweaks {
		t(svc)
	}
	return svc
}

func withAnnotation(k annotation.Name, v string) serviceTweak {
	return func(s *corev1.Service) { s.Annotations[string(k)] = v }
}

// withPorts adds TCP ports; the node port is 30000 + port.
func withPorts(ports ...int32) serviceTweak {
	return func(s *corev1.Service) {
		for _, p := range ports {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Protocol: corev1.ProtocolTCP, Port: p, NodePort: 30000 + p})
		}
	}
}

type inputTweak func(*lbservice.DesiredInput)

func withNetwork(in *lbservice.DesiredInput) {
	in.Network = &lbplan.ClusterNetwork{ID: 5, Name: "k8s", IPRange: "10.0.0.0/8"}
}

func withNodes(ids ...int64) inputTweak {
	return func(in *lbservice.DesiredInput) {
		in.Nodes = nil
		for _, id := range ids {
			in.Nodes = append(in.Nodes, lbplan.Node{Name: "node-" + string(rune('a'+id)), ServerID: id, Labels: map[string]string{}})
		}
	}
}

func newInput(svc *corev1.Service, tweaks ...inputTweak) lbservice.DesiredInput {
	in := lbservice.DesiredInput{
		Service:  svc,
		Name:     "web-lb",
		Defaults: config.LoadBalancer{Location: "fsn1"},
		Nodes:    []lbplan.Node{{Name: "node-1", ServerID: 1}, {Name: "node-2", ServerID: 2}},
	}
	for _, t := range tweaks {
		t(&in)
	}
	return in
}

func mustDesired(t *testing.T, in lbservice.DesiredInput) lbplan.Desired {
	t.Helper()
	d, err := lbservice.NewDesired(in)
	if err != nil {
		t.Fatalf("NewDesired: %v", err)
	}
	return d
}

type lbTweak func(*hcloud.LoadBalancer)

// newLB is the load balancer the API holds after newInput(newService("web", withPorts(80)))
// was created, with the API's defaults filled in: Compute must find nothing to do for it.
func newLB(tweaks ...lbTweak) *hcloud.LoadBalancer {
	lb := &hcloud.LoadBalancer{
		ID:               7,
		Name:             "web-lb",
		Labels:           map[string]string{lbplan.LabelServiceUID: uid},
		LoadBalancerType: &hcloud.LoadBalancerType{Name: "lb11", MaxTargets: 25},
		Location:         &hcloud.Location{Name: "fsn1", NetworkZone: hcloud.NetworkZoneEUCentral},
		Algorithm:        hcloud.LoadBalancerAlgorithm{Type: hcloud.LoadBalancerAlgorithmTypeRoundRobin},
		PublicNet: hcloud.LoadBalancerPublicNet{
			Enabled: true,
			IPv4:    hcloud.LoadBalancerPublicNetIPv4{IP: net.ParseIP("203.0.113.10"), DNSPtr: "static.10.113.0.203.clients.your-server.de"},
			IPv6:    hcloud.LoadBalancerPublicNetIPv6{IP: net.ParseIP("2001:db8::1"), DNSPtr: "static.example"},
		},
		Services: []hcloud.LoadBalancerService{apiService(80)},
		Targets:  []hcloud.LoadBalancerTarget{serverTarget(1, false), serverTarget(2, false)},
	}
	for _, t := range tweaks {
		t(lb)
	}
	return lb
}

func apiService(port int) hcloud.LoadBalancerService {
	return hcloud.LoadBalancerService{
		Protocol: hcloud.LoadBalancerServiceProtocolTCP, ListenPort: port, DestinationPort: 30000 + port,
		HTTP: hcloud.LoadBalancerServiceHTTP{CookieName: "HCLBSTICKY", CookieLifetime: 300 * time.Second},
		HealthCheck: hcloud.LoadBalancerServiceHealthCheck{
			Protocol: hcloud.LoadBalancerServiceProtocolTCP, Port: 30000 + port,
			Interval: 15 * time.Second, Timeout: 10 * time.Second, Retries: 3,
		},
	}
}

func serverTarget(id int64, private bool) hcloud.LoadBalancerTarget {
	return hcloud.LoadBalancerTarget{
		Type: hcloud.LoadBalancerTargetTypeServer, UsePrivateIP: private,
		Server: &hcloud.LoadBalancerTargetServer{Server: &hcloud.Server{ID: id}},
	}
}

func attached(ip string) lbTweak {
	return func(lb *hcloud.LoadBalancer) {
		lb.PrivateNet = []hcloud.LoadBalancerPrivateNet{{Network: &hcloud.Network{ID: 5}, IP: net.ParseIP(ip)}}
	}
}

func TestCompute(t *testing.T) {
	web := func(tweaks ...serviceTweak) *corev1.Service {
		return newService("web", append([]serviceTweak{withPorts(80)}, tweaks...)...)
	}
	tests := []struct {
		name   string
		in     lbservice.DesiredInput
		actual *hcloud.LoadBalancer
		want   []string
	}{
		{
			name: "a new service creates the load balancer, its listener and its targets",
			in:   newInput(web()),
			want: []string{"create(web-lb)", "add_service(80)", "add_target(server:1)", "add_target(server:2)"},
		},
		{
			name: "a new service in a network attaches at create time",
			in:   newInput(web(withAnnotation(annotation.LBUsePrivateIP, "true")), withNetwork),
			want: []string{"create(web-lb)", "add_service(80)", "add_target(server:1)", "add_target(server:2)"},
		},
		{
			name: "a fixed private IP attaches after create",
			in:   newInput(web(withAnnotation(annotation.LBPrivateIPv4, "10.0.0.9")), withNetwork),
			want: []string{"create(web-lb)", "attach_to_network(5)", "add_service(80)", "add_target(server:1)", "add_target(server:2)"},
		},
		{
			name: "rDNS annotations are applied after create",
			in:   newInput(web(withAnnotation(annotation.LBPublicIPv4RDNS, "lb.example.com"))),
			want: []string{"create(web-lb)", "change_dns_ptr(ipv4)", "add_service(80)", "add_target(server:1)", "add_target(server:2)"},
		},
		{
			name:   "an unchanged load balancer needs nothing",
			in:     newInput(web()),
			actual: newLB(),
			want:   nil,
		},
		{
			name:   "an unchanged load balancer with every optional setting needs nothing",
			in:     newInput(web(withAnnotation(annotation.LBSvcHealthCheckInterval, "15s"), withAnnotation(annotation.LBSvcHealthCheckRetries, "3"), withAnnotation(annotation.LBPublicIPv4RDNS, "static.10.113.0.203.clients.your-server.de"))),
			actual: newLB(),
			want:   nil,
		},
		{
			name:   "an adopted load balancer without the UID label gets it, keeping its other labels",
			in:     newInput(web()),
			actual: newLB(func(lb *hcloud.LoadBalancer) { lb.Labels = map[string]string{"team": "a"} }),
			want:   []string{"update(web-lb)"},
		},
		{
			name:   "a changed name annotation renames the same load balancer",
			in:     newInput(web(), func(in *lbservice.DesiredInput) { in.Name, in.Rename = "shop-web", true }),
			actual: newLB(),
			want:   []string{"update(shop-web)"},
		},
		{
			name:   "a changed default name does not rename",
			in:     newInput(web(), func(in *lbservice.DesiredInput) { in.Name = "a5f0c6a1e" }),
			actual: newLB(),
			want:   nil,
		},
		{
			name:   "a type annotation changes the type",
			in:     newInput(web(withAnnotation(annotation.LBType, "lb21"))),
			actual: newLB(),
			want:   []string{"change_type(lb21)"},
		},
		{
			name:   "a removed type annotation does not downgrade",
			in:     newInput(web()),
			actual: newLB(func(lb *hcloud.LoadBalancer) { lb.LoadBalancerType.Name = "lb21" }),
			want:   nil,
		},
		{
			name:   "HCLOUD_LOAD_BALANCERS_TYPE changes an existing load balancer (official)",
			in:     newInput(web(), func(in *lbservice.DesiredInput) { in.Defaults.Type = "lb11" }),
			actual: newLB(func(lb *hcloud.LoadBalancer) { lb.LoadBalancerType.Name = "lb21" }),
			want:   []string{"change_type(lb11)"},
		},
		{
			name:   "an unset algorithm leaves a changed one alone (official)",
			in:     newInput(web()),
			actual: newLB(func(lb *hcloud.LoadBalancer) { lb.Algorithm.Type = hcloud.LoadBalancerAlgorithmTypeLeastConnections }),
			want:   nil,
		},
		{
			name: "an unset public network setting leaves a disabled interface alone (official)",
			in:   newInput(web(withAnnotation(annotation.LBUsePrivateIP, "true")), withNetwork),
			actual: newLB(attached("10.0.0.3"), func(lb *hcloud.LoadBalancer) {
				lb.PublicNet.Enabled = false
				lb.Targets = []hcloud.LoadBalancerTarget{serverTarget(1, true), serverTarget(2, true)}
			}),
			want: nil,
		},
		{
			name: "unset listener settings leave drifted ones alone (official)",
			in:   newInput(web()),
			actual: newLB(func(lb *hcloud.LoadBalancer) {
				lb.Services[0].Proxyprotocol = true
				lb.Services[0].HealthCheck.Interval = 30 * time.Second
				lb.Services[0].HealthCheck.Retries = 7
			}),
			want: nil,
		},
		{
			name: "IP targets are removed, as the official CCM removes them without Robot",
			in:   newInput(web()),
			actual: newLB(func(lb *hcloud.LoadBalancer) {
				lb.Targets = append(lb.Targets, hcloud.LoadBalancerTarget{Type: hcloud.LoadBalancerTargetTypeIP, IP: &hcloud.LoadBalancerTargetIP{IP: "203.0.113.50"}})
			}),
			want: []string{"remove_target(ip:203.0.113.50)"},
		},
		{
			name:   "without a cluster network a foreign attachment is detached (official)",
			in:     newInput(web()),
			actual: newLB(attached("10.9.0.3")),
			want:   []string{"detach_from_network(5)"},
		},
		{
			name:   "a location change on an existing load balancer is ignored (create-only, official)",
			in:     newInput(web(withAnnotation(annotation.LBLocation, "nbg1"))),
			actual: newLB(),
			want:   nil,
		},
		{
			name:   "a changed algorithm is applied",
			in:     newInput(web(withAnnotation(annotation.LBAlgorithmType, "least_connections"))),
			actual: newLB(),
			want:   []string{"change_algorithm(least_connections)"},
		},
		{
			name:   "a changed IPv6 rDNS is applied",
			in:     newInput(web(withAnnotation(annotation.LBPublicIPv6RDNS, "lb6.example.com"))),
			actual: newLB(),
			want:   []string{"change_dns_ptr(ipv6)"},
		},
		{
			name:   "a load balancer outside the network is attached",
			in:     newInput(web(), withNetwork),
			actual: newLB(),
			want:   []string{"attach_to_network(5)"},
		},
		{
			name:   "a wrong private IP detaches and re-attaches",
			in:     newInput(web(withAnnotation(annotation.LBPrivateIPv4, "10.0.0.9")), withNetwork),
			actual: newLB(attached("10.0.0.3")),
			want:   []string{"detach_from_network(5)", "attach_to_network(5)"},
		},
		{
			name:   "a right private IP is kept",
			in:     newInput(web(withAnnotation(annotation.LBPrivateIPv4, "10.0.0.3")), withNetwork),
			actual: newLB(attached("10.0.0.3")),
			want:   nil,
		},
		{
			name: "disabling the public network moves targets to private IPs first",
			in: newInput(web(withAnnotation(annotation.LBDisablePublicNetwork, "true"), withAnnotation(annotation.LBUsePrivateIP, "true")),
				withNetwork),
			actual: newLB(attached("10.0.0.3")),
			want: []string{"remove_target(server:1)", "remove_target(server:2)", "add_target(server:1)", "add_target(server:2)",
				"disable_public_interface"},
		},
		{
			name: "re-enabling the public network comes first",
			in:   newInput(web(withAnnotation(annotation.LBUsePrivateIP, "true"), withAnnotation(annotation.LBDisablePublicNetwork, "false")), withNetwork),
			actual: newLB(attached("10.0.0.3"), func(lb *hcloud.LoadBalancer) {
				lb.PublicNet.Enabled = false
				lb.Targets = []hcloud.LoadBalancerTarget{serverTarget(1, true), serverTarget(2, true)}
			}),
			want: []string{"enable_public_interface"},
		},
		{
			name:   "proxy protocol updates the listener",
			in:     newInput(web(withAnnotation(annotation.LBSvcProxyProtocol, "true"))),
			actual: newLB(),
			want:   []string{"update_service(80)"},
		},
		{
			name: "a changed node port updates the listener",
			in: newInput(newService("web", func(s *corev1.Service) {
				s.Spec.Ports = []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 31111}}
			})),
			actual: newLB(),
			want:   []string{"update_service(80)"},
		},
		{
			name:   "a changed health check updates the listener",
			in:     newInput(web(withAnnotation(annotation.LBSvcHealthCheckTimeout, "5"))),
			actual: newLB(),
			want:   []string{"update_service(80)"},
		},
		{
			name:   "a changed protocol updates the listener",
			in:     newInput(web(withAnnotation(annotation.LBSvcProtocol, "http"))),
			actual: newLB(),
			want:   []string{"update_service(80)"},
		},
		{
			name: "changed certificates update the listener",
			in:   newInput(web(withAnnotation(annotation.LBSvcProtocol, "https")), func(in *lbservice.DesiredInput) { in.CertificateIDs = []int64{9, 8} }),
			actual: newLB(func(lb *hcloud.LoadBalancer) {
				lb.Services[0].Protocol = hcloud.LoadBalancerServiceProtocolHTTPS
				lb.Services[0].HTTP.Certificates = []*hcloud.Certificate{{ID: 8}}
			}),
			want: []string{"update_service(80)"},
		},
		{
			name: "unchanged certificates in another order need nothing",
			in:   newInput(web(withAnnotation(annotation.LBSvcProtocol, "https")), func(in *lbservice.DesiredInput) { in.CertificateIDs = []int64{9, 8} }),
			actual: newLB(func(lb *hcloud.LoadBalancer) {
				lb.Services[0].Protocol = hcloud.LoadBalancerServiceProtocolHTTPS
				lb.Services[0].HTTP.Certificates = []*hcloud.Certificate{{ID: 9}, {ID: 8}}
			}),
			want: nil,
		},
		{
			name: "a managed certificate that does not exist yet is created before the listener changes",
			in: newInput(web(withAnnotation(annotation.LBSvcProtocol, "https"), withAnnotation(annotation.LBSvcHTTPCertificateType, "managed"),
				withAnnotation(annotation.LBSvcHTTPManagedCertificateDomains, "example.com"))),
			actual: newLB(),
			want:   []string{"create_managed_certificate(ccm-managed-certificate-" + uid + ")", "update_service(80)"},
		},
		{
			name: "an existing managed certificate in use needs nothing",
			in: newInput(web(withAnnotation(annotation.LBSvcProtocol, "https"), withAnnotation(annotation.LBSvcHTTPCertificateType, "managed"),
				withAnnotation(annotation.LBSvcHTTPManagedCertificateDomains, "example.com")), func(in *lbservice.DesiredInput) { in.ManagedCertificateID = 12 }),
			actual: newLB(func(lb *hcloud.LoadBalancer) {
				lb.Services[0].Protocol = hcloud.LoadBalancerServiceProtocolHTTPS
				lb.Services[0].HTTP.Certificates = []*hcloud.Certificate{{ID: 12}}
			}),
			want: nil,
		},
		{
			name:   "a new and a removed port add and delete listeners, deletes first",
			in:     newInput(newService("web", withPorts(443))),
			actual: newLB(),
			want:   []string{"delete_service(80)", "add_service(443)"},
		},
		{
			name:   "a new node is added and a gone node removed",
			in:     newInput(web(), withNodes(2, 3)),
			actual: newLB(),
			want:   []string{"remove_target(server:1)", "add_target(server:3)"},
		},
		{
			name:   "nodes not matching the node selector are removed",
			in:     newInput(web(withAnnotation(annotation.LBNodeSelector, "role=edge")), func(in *lbservice.DesiredInput) { in.Nodes[1].Labels = map[string]string{"role": "edge"} }),
			actual: newLB(),
			want:   []string{"remove_target(server:1)"},
		},
		{
			name: "excluded nodes are removed",
			in: newInput(web(), func(in *lbservice.DesiredInput) {
				in.Nodes[0].Labels = map[string]string{lbplan.LabelExcludeFromLB: ""}
			}),
			actual: newLB(),
			want:   []string{"remove_target(server:1)"},
		},
		{
			name:   "a use-private-ip flip removes and adds every target",
			in:     newInput(web(withAnnotation(annotation.LBUsePrivateIP, "true")), withNetwork),
			actual: newLB(attached("10.0.0.3")),
			want:   []string{"remove_target(server:1)", "remove_target(server:2)", "add_target(server:1)", "add_target(server:2)"},
		},
		{
			name:   "targets beyond max_targets are not added",
			in:     newInput(web(), withNodes(1, 2, 3, 4)),
			actual: newLB(func(lb *hcloud.LoadBalancer) { lb.LoadBalancerType.MaxTargets = 3 }),
			want:   []string{"add_target(server:3)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := lbplan.Compute(mustDesired(t, tc.in), lbplan.NewActual(tc.actual))
			if err != nil {
				t.Fatalf("Compute: %v", err)
			}
			if diff := cmp.Diff(tc.want, p.Labels(), cmpEmpty); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if (len(tc.want) == 0) != p.Empty() {
				t.Errorf("Empty() = %v", p.Empty())
			}
		})
	}
}

var cmpEmpty = cmp.Comparer(func(a, b []string) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return cmp.Equal(a, b)
})

func TestCompute_MaxTargetsReported(t *testing.T) {
	in := newInput(newService("web", withPorts(80)), withNodes(1, 2, 3, 4))
	d := mustDesired(t, in)
	d.MaxTargets = 2
	p, err := lbplan.Compute(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	var skipped []int64
	for _, s := range p.SkippedTargets {
		skipped = append(skipped, s.ServerID)
	}
	if diff := cmp.Diff([]int64{3, 4}, skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
}

func TestCompute_Guardrails(t *testing.T) {
	web := func(tweaks ...serviceTweak) *corev1.Service {
		return newService("web", append([]serviceTweak{withPorts(80)}, tweaks...)...)
	}
	tests := []struct {
		name    string
		in      lbservice.DesiredInput
		tweak   func(*lbplan.Desired)
		actual  *hcloud.LoadBalancer
		wantErr string
	}{
		{
			name:    "a desired state without the UID label is refused",
			in:      newInput(web()),
			tweak:   func(d *lbplan.Desired) { delete(d.Labels, lbplan.LabelServiceUID) },
			actual:  newLB(),
			wantErr: "no hcloud-ccm/service-uid label",
		},
		{
			name:    "a create without location or network zone is refused",
			in:      newInput(web(), func(in *lbservice.DesiredInput) { in.Defaults.Location = "" }),
			wantErr: `neither "load-balancer.hetzner.cloud/location" nor`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := mustDesired(t, tc.in)
			if tc.tweak != nil {
				tc.tweak(&d)
			}
			_, err := lbplan.Compute(d, lbplan.NewActual(tc.actual))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestCompute_NeverRemovesTheUIDLabel(t *testing.T) {
	lb := newLB(func(lb *hcloud.LoadBalancer) {
		lb.Labels = map[string]string{lbplan.LabelServiceUID: "stale", "x": "y"}
	})
	p, err := lbplan.Compute(mustDesired(t, newInput(newService("web", withPorts(80)))), lbplan.NewActual(lb))
	if err != nil {
		t.Fatal(err)
	}
	u, ok := p.Mutations[0].(lbplan.Update)
	if !ok || len(p.Mutations) != 1 {
		t.Fatalf("plan = %v", p.Labels())
	}
	if diff := cmp.Diff(map[string]string{lbplan.LabelServiceUID: uid, "x": "y"}, u.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if lb.Labels[lbplan.LabelServiceUID] != "stale" {
		t.Errorf("Compute modified the actual load balancer's labels")
	}
}

func TestNewDesired_InvalidCombinations(t *testing.T) {
	web := func(tweaks ...serviceTweak) *corev1.Service {
		return newService("web", append([]serviceTweak{withPorts(80)}, tweaks...)...)
	}
	tests := []struct {
		name    string
		in      lbservice.DesiredInput
		wantErr string
	}{
		{"disable-public-network without a network is refused", newInput(web(withAnnotation(annotation.LBDisablePublicNetwork, "true"))), `"load-balancer.hetzner.cloud/disable-public-network" needs a network`},
		{"use-private-ip without a network is refused", newInput(web(withAnnotation(annotation.LBUsePrivateIP, "true"))), `"load-balancer.hetzner.cloud/use-private-ip" needs a network`},
		{"disable-public-network with public targets is refused", newInput(web(withAnnotation(annotation.LBDisablePublicNetwork, "true")), withNetwork), `set "load-balancer.hetzner.cloud/use-private-ip" to true`},
		{"a subnet that is not in the network is refused", newInput(web(withAnnotation(annotation.LBPrivateSubnetIPRange, "10.9.0.0/24")), withNetwork, func(in *lbservice.DesiredInput) { in.Network.Subnets = []string{"10.0.0.0/24"} }),
			`10.9.0.0/24 is not a subnet of network`},
		{"a bad bool names the annotation", newInput(web(withAnnotation(annotation.LBSvcProxyProtocol, "yes"))), `invalid value for "load-balancer.hetzner.cloud/uses-proxyprotocol": "yes"`},
		{"a bad delete protection names the annotation", newInput(web(withAnnotation(annotation.LBDeleteProtection, "on"))), `invalid value for "service.hcloud-policy-ccm.io/load-balancer-delete-protection": "on"`},
		{"a bad selector names the annotation", newInput(web(withAnnotation(annotation.LBNodeSelector, "a b"))), `invalid value for "load-balancer.hetzner.cloud/node-selector"`},
		{"managed certificates need domains", newInput(web(withAnnotation(annotation.LBSvcProtocol, "https"), withAnnotation(annotation.LBSvcHTTPCertificateType, "managed"))), `set "load-balancer.hetzner.cloud/http-managed-certificate-domains"`},
		{"a bad environment algorithm names the variable", newInput(web(), func(in *lbservice.DesiredInput) { in.Defaults.AlgorithmType = "x" }), `"HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE"`},
		{"a port without node port is refused", newInput(newService("web", func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{{Port: 80}} })), "has no node port"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := lbservice.NewDesired(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestNewDesired_AsTheOfficial holds the values the official CCM sends on (or reads its own
// way) that an earlier version of this CCM refused: each is accepted with the official's meaning.
func TestNewDesired_AsTheOfficial(t *testing.T) {
	https := func(tweaks ...serviceTweak) *corev1.Service {
		return newService("web", append([]serviceTweak{withPorts(443), withAnnotation(annotation.LBSvcProtocol, "https")}, tweaks...)...)
	}
	tests := []struct {
		name  string
		in    lbservice.DesiredInput
		check func(*testing.T, lbplan.Desired)
	}{
		{"https without certificates is sent without certificates", newInput(https()), func(t *testing.T, d lbplan.Desired) {
			if s := d.Services[0]; s.Protocol != hcloud.LoadBalancerServiceProtocolHTTPS || s.HTTP.Certificates != nil {
				t.Errorf("service = %+v, want https without certificates", s)
			}
		}},
		{"an idle timeout outside 30s-300s is sent as it is", newInput(newService("web", withPorts(80), withAnnotation(annotation.LBSvcProtocol, "http"), withAnnotation(annotation.LBSvcHTTPTimeoutIdle, "10s"))), func(t *testing.T, d lbplan.Desired) {
			if got := d.Services[0].HTTP.TimeoutIdle; got == nil || *got != 10*time.Second {
				t.Errorf("timeout idle = %v, want 10s", got)
			}
		}},
		{"certificate-type Managed (not exactly managed) means uploaded", newInput(https(withAnnotation(annotation.LBSvcHTTPCertificateType, "Managed")), func(in *lbservice.DesiredInput) { in.CertificateIDs = []int64{7} }), func(t *testing.T, d lbplan.Desired) {
			if d.ManagedCertificate != nil || !slices.Equal(d.Services[0].HTTP.Certificates, []int64{7}) {
				t.Errorf("managed %+v, certificates %v; want uploaded certificate 7", d.ManagedCertificate, d.Services[0].HTTP.Certificates)
			}
		}},
		{"an unknown certificate-type means uploaded", newInput(https(withAnnotation(annotation.LBSvcHTTPCertificateType, "letsencrypt"))), func(t *testing.T, d lbplan.Desired) {
			if d.ManagedCertificate != nil || d.Services[0].HTTP.Certificates != nil {
				t.Errorf("managed %+v, certificates %v; want uploaded, none", d.ManagedCertificate, d.Services[0].HTTP.Certificates)
			}
		}},
		{"an empty managed certificate name is the default name", newInput(https(withAnnotation(annotation.LBSvcHTTPCertificateType, "managed"),
			withAnnotation(annotation.LBSvcHTTPManagedCertificateDomains, "shop.example.com"), withAnnotation(annotation.LBSvcHTTPManagedCertificateName, ""))), func(t *testing.T, d lbplan.Desired) {
			if d.ManagedCertificate == nil || d.ManagedCertificate.Name != "ccm-managed-certificate-"+uid {
				t.Errorf("managed certificate = %+v", d.ManagedCertificate)
			}
		}},
		{"an acme-staging value that is no bool is false", newInput(https(withAnnotation(annotation.LBSvcHTTPCertificateType, "managed"),
			withAnnotation(annotation.LBSvcHTTPManagedCertificateDomains, "shop.example.com"), withAnnotation(annotation.LBSvcHTTPManagedCertificateUseACMEStaging, "yes"))), func(t *testing.T, d lbplan.Desired) {
			if d.ManagedCertificate == nil || d.ManagedCertificate.Labels[lbplan.LabelACMEStaging] != "" {
				t.Errorf("managed certificate = %+v, want no staging label", d.ManagedCertificate)
			}
		}},
		{"a hostname that is no DNS name goes to the status as it is", newInput(newService("web", withPorts(80), withAnnotation(annotation.LBHostname, "Not A Host"))), func(t *testing.T, d lbplan.Desired) {
			if !d.Status.HostnameSet || d.Status.Hostname != "Not A Host" {
				t.Errorf("status options = %+v", d.Status)
			}
		}},
		{"an empty hostname is a hostname", newInput(newService("web", withPorts(80), withAnnotation(annotation.LBHostname, ""))), func(t *testing.T, d lbplan.Desired) {
			if !d.Status.HostnameSet || d.Status.Hostname != "" {
				t.Errorf("status options = %+v", d.Status)
			}
		}},
		{"an empty type hides HCLOUD_LOAD_BALANCERS_TYPE: lb11, unconfigured", newInput(newService("web", withPorts(80), withAnnotation(annotation.LBType, "")), func(in *lbservice.DesiredInput) { in.Defaults.Type = "lb21" }), func(t *testing.T, d lbplan.Desired) {
			if d.Type != lbplan.DefaultType || d.TypeSet || !d.TypeUnconfigured {
				t.Errorf("type %q set %v unconfigured %v; want lb11, not set, unconfigured", d.Type, d.TypeSet, d.TypeUnconfigured)
			}
		}},
		{"without the type annotation HCLOUD_LOAD_BALANCERS_TYPE applies", newInput(newService("web", withPorts(80)), func(in *lbservice.DesiredInput) { in.Defaults.Type = "lb21" }), func(t *testing.T, d lbplan.Desired) {
			if d.Type != "lb21" || !d.TypeSet || d.TypeUnconfigured {
				t.Errorf("type %q set %v unconfigured %v; want lb21, set", d.Type, d.TypeSet, d.TypeUnconfigured)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, mustDesired(t, tc.in))
		})
	}
}

func TestNewDesired_Defaults(t *testing.T) {
	svc := newService("web", withPorts(80), func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30053})
	})
	yes := true
	in := newInput(svc, withNetwork, func(in *lbservice.DesiredInput) {
		in.Defaults = config.LoadBalancer{
			NetworkZone: "eu-central", Type: "lb21", AlgorithmType: "least_connections", UsePrivateIP: true,
			UsesProxyProtocol: &yes, HealthCheckInterval: 20 * time.Second, HealthCheckRetries: 5, PrivateSubnetIPRange: "10.0.1.0/24",
		}
	})
	d := mustDesired(t, in)
	if d.Type != "lb21" || !d.TypeSet || d.TypeUnconfigured || d.NetworkZone != "eu-central" || d.Algorithm == nil || *d.Algorithm != "least_connections" {
		t.Errorf("defaults not applied: %+v", d)
	}
	if len(d.UnsupportedPorts) != 1 || d.UnsupportedPorts[0].Port != 53 {
		t.Errorf("unsupported ports = %v", d.UnsupportedPorts)
	}
	s := d.Services[0]
	if !*s.Proxyprotocol || *s.HealthCheck.Interval != 20*time.Second || *s.HealthCheck.Retries != 5 || s.HealthCheck.Port != 30080 {
		t.Errorf("service = %+v", s)
	}
	if d.Network == nil || d.Network.Subnet.String() != "10.0.1.0/24" || !d.Targets[0].UsePrivateIP || !d.Status.ProxyProtocol {
		t.Errorf("network/targets = %+v %+v", d.Network, d.Targets)
	}
	unconfigured := mustDesired(t, newInput(newService("web", withPorts(80))))
	if unconfigured.Type != "lb11" || !unconfigured.TypeUnconfigured {
		t.Errorf("type = %q unconfigured = %v", unconfigured.Type, unconfigured.TypeUnconfigured)
	}
	annotated := mustDesired(t, newInput(newService("web", withPorts(80), withAnnotation(annotation.LBLocation, "nbg1"), withAnnotation(annotation.LBNetworkZone, "eu-central"))))
	if annotated.Location != "nbg1" || annotated.NetworkZone != "" {
		t.Errorf("location must win over network zone: %q %q", annotated.Location, annotated.NetworkZone)
	}
	cleared := mustDesired(t, newInput(newService("web", withPorts(80), withAnnotation(annotation.LBLocation, ""), withAnnotation(annotation.LBNetworkZone, "eu-central"))))
	if cleared.Location != "" || cleared.NetworkZone != "eu-central" {
		t.Errorf("an empty location annotation must clear the default: %q %q", cleared.Location, cleared.NetworkZone)
	}
}

func TestNewDesired_DoesNotModifyTheService(t *testing.T) {
	svc := newService("web", withPorts(80), withAnnotation(annotation.LBSvcProtocol, "http"))
	before := svc.DeepCopy()
	mustDesired(t, newInput(svc))
	if diff := cmp.Diff(before, svc); diff != "" {
		t.Errorf("service modified:\n%s", diff)
	}
}

func TestPlan_Steps(t *testing.T) {
	in := newInput(newService("web", withPorts(80, 443), withAnnotation(annotation.LBType, "lb21")), withNodes(1))
	p, err := lbplan.Compute(mustDesired(t, in), lbplan.NewActual(newLB(func(lb *hcloud.LoadBalancer) { lb.Targets = lb.Targets[:1] })))
	if err != nil {
		t.Fatal(err)
	}
	steps := p.Steps()
	if diff := cmp.Diff([]string{"change_type(lb21)", "add_service(443)"}, p.Labels()); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	if steps[0].Current.Type != "lb11" || steps[0].LoadBalancer.Type != "lb21" {
		t.Errorf("step 0: current %q, after %q", steps[0].Current.Type, steps[0].LoadBalancer.Type)
	}
	if steps[1].Current.Type != "lb21" || len(steps[1].Current.Services) != 1 || len(steps[1].LoadBalancer.Services) != 2 {
		t.Errorf("step 1: current %+v after %+v", steps[1].Current, steps[1].LoadBalancer)
	}
	want := input.LBService{Protocol: "tcp", ListenPort: 443, DestinationPort: 30443,
		HealthCheck: input.LBHealthCheck{Protocol: "tcp", Port: 30443}} // the official CCM's plain check: nothing else sent
	if diff := cmp.Diff(want, steps[1].LoadBalancer.Services[1]); diff != "" {
		t.Errorf("added service (-want +got):\n%s", diff)
	}
	if steps[1].Mutation.Action() != input.ActionLoadBalancerUpdate || steps[1].Mutation.Operation() != "add_service" {
		t.Errorf("action/operation = %s/%s", steps[1].Mutation.Action(), steps[1].Mutation.Operation())
	}
}

func TestCompute_ManagedCertificateOnCreate(t *testing.T) {
	svc := newService("web", withPorts(443), withAnnotation(annotation.LBSvcProtocol, "https"), withAnnotation(annotation.LBSvcHTTPCertificateType, "managed"),
		withAnnotation(annotation.LBSvcHTTPManagedCertificateDomains, "a.example.com, b.example.com"),
		withAnnotation(annotation.LBSvcHTTPManagedCertificateName, "web-cert"), withAnnotation(annotation.LBSvcHTTPManagedCertificateUseACMEStaging, "true"))
	p, err := lbplan.Compute(mustDesired(t, newInput(svc, withNodes())), nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"create(web-lb)", "create_managed_certificate(web-cert)", "add_service(443)"}, p.Labels()); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	c := p.Mutations[1].(lbplan.CreateManagedCertificate).Certificate
	want := lbplan.ManagedCertificate{Name: "web-cert", Domains: []string{"a.example.com", "b.example.com"},
		Labels: map[string]string{lbplan.LabelServiceUID: uid, lbplan.LabelACMEStaging: "true"}}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("certificate (-want +got):\n%s", diff)
	}
	if got := p.Mutations[2].(lbplan.AddService).Listener.HTTP.Certificates; !cmp.Equal(got, []int64{lbplan.PendingCertificateID}) {
		t.Errorf("listener certificates = %v, want the pending one", got)
	}
}

func TestPlan_StepsKnowTheClusterNetworkRange(t *testing.T) {
	in := newInput(newService("web", withPorts(80), withAnnotation(annotation.LBAlgorithmType, "least_connections")), withNetwork)
	p, err := lbplan.Compute(mustDesired(t, in), lbplan.NewActual(newLB(attached("10.0.0.3"))))
	if err != nil {
		t.Fatal(err)
	}
	st := p.Steps()[0]
	want := &input.LBNetwork{ID: 5, IPRange: "10.0.0.0/8", PrivateIP: "10.0.0.3"}
	if diff := cmp.Diff(want, st.Current.Network); diff != "" {
		t.Errorf("current network (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(st.Current.Network, st.LoadBalancer.Network); diff != "" {
		t.Errorf("an algorithm change must not change the network view:\n%s", diff)
	}
}

func TestPlan_StepsOnCreate(t *testing.T) {
	p, err := lbplan.Compute(mustDesired(t, newInput(newService("web", withPorts(80)), withNodes(1))), nil)
	if err != nil {
		t.Fatal(err)
	}
	steps := p.Steps()
	if steps[0].Current != nil || steps[0].LoadBalancer.Name != "web-lb" || steps[0].Mutation.Action() != input.ActionLoadBalancerCreate {
		t.Errorf("create step = %+v", steps[0])
	}
	last := steps[len(steps)-1].LoadBalancer
	if len(last.Services) != 1 || len(last.Targets) != 1 || last.Labels[lbplan.LabelServiceUID] != uid || last.Location != "fsn1" {
		t.Errorf("final view = %+v", last)
	}
	for i, st := range steps {
		if diff := cmp.Diff(last, st.Final); diff != "" {
			t.Errorf("step %d (%s): Final is not the state after the last step (-want +got):\n%s", i, st.Mutation.Label(), diff)
		}
	}
}

func TestComputeDelete(t *testing.T) {
	p, err := lbplan.ComputeDelete(lbplan.NewActual(newLB()))
	if err != nil || cmp.Diff([]string{"delete(web-lb)"}, p.Labels()) != "" {
		t.Fatalf("plan %v, err %v", p.Labels(), err)
	}
	st := p.Steps()[0]
	if st.Mutation.Action() != input.ActionLoadBalancerDelete || st.Current.Name != "web-lb" || st.LoadBalancer.Name != "web-lb" {
		t.Errorf("delete step = %+v", st)
	}
	if st.Final != nil {
		t.Errorf("delete step Final = %+v, want nil (nothing is left after a delete)", st.Final)
	}
	_, err = lbplan.ComputeDelete(lbplan.NewActual(newLB(func(lb *hcloud.LoadBalancer) { lb.Protection.Delete = true })))
	var protected *lbplan.ProtectedError
	if !errors.Is(err, lbplan.ErrProtected) || !errors.As(err, &protected) || protected.ID != 7 {
		t.Errorf("err = %v, want a *ProtectedError for load balancer 7 matching ErrProtected", err)
	}
	if p, err := lbplan.ComputeDelete(nil); err != nil || !p.Empty() {
		t.Errorf("nil: %v %v", p.Labels(), err)
	}
}

// FuzzCompute sets every annotation to the same value: building the desired state and planning
// against a live load balancer must never panic, and a plan never drops the UID label.
func FuzzCompute(f *testing.F) {
	for _, seed := range []string{"", "true", "15s", "10.0.0.1", "10.0.0.0/24", "https", "a,b", "role in (a)", "lb21", "-1", "\x00"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		svc := newService("web", withPorts(80, 443))
		for _, n := range annotation.All {
			svc.Annotations[string(n)] = v
		}
		in := newInput(svc, withNetwork, func(in *lbservice.DesiredInput) { in.CertificateIDs = []int64{1} })
		d, err := lbservice.NewDesired(in)
		if err != nil {
			return
		}
		for _, actual := range []*lbplan.Actual{nil, lbplan.NewActual(newLB(attached("10.0.0.3")))} {
			p, err := lbplan.Compute(d, actual)
			if err != nil {
				continue
			}
			for _, st := range p.Steps() {
				if st.LoadBalancer.Labels[lbplan.LabelServiceUID] != uid {
					t.Fatalf("%s drops the UID label: %v", st.Mutation.Label(), st.LoadBalancer.Labels)
				}
			}
		}
	})
}

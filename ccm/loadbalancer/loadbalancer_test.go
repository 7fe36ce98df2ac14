package loadbalancer_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/testutil"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

func TestEnsureLoadBalancer_CreateThenNoOp(t *testing.T) {
	ev := newEnv(t)
	svc := newService("web", withPorts(80, 443), withAnnotation(annotation.LBPublicIPv6RDNS, "lb6.example.com"))
	st := ev.mustEnsure(svc)
	createCounts := ev.emu.Counts()
	t.Logf("create: %d mutating, %d reads: %v", ev.emu.MutatingRequests(), reads(createCounts), createCounts)
	// The listeners and targets ride along with the create; the PTR record needs the address.
	if n := ev.emu.MutatingRequests(); n != 2 || createCounts["POST /v1/load_balancers"] != 1 || createCounts["POST /v1/load_balancers/{id}/actions/change_dns_ptr"] != 1 {
		t.Errorf("create with 2 ports, 2 targets and a PTR record made %d mutating requests, want create + change_dns_ptr: %v", n, createCounts)
	}
	if n := reads(createCounts); n != 5 || createCounts["GET /v1/load_balancers/{id}"] != 0 {
		t.Errorf("create cost %d reads, want 5 (UID label, name, types, two action polls) and no reload: %v", n, createCounts)
	}

	lb := ev.onlyLB()
	if lb.Name != cloudprovider.DefaultLoadBalancerName(svc) || lb.Labels[lbplan.LabelServiceUID] != testUID {
		t.Errorf("name %q labels %v", lb.Name, lb.Labels)
	}
	if len(lb.Services) != 2 || len(lb.Targets) != 2 || lb.LoadBalancerType.Name != "lb11" || lb.Location.Name != "fsn1" {
		t.Errorf("services %d targets %d type %s location %s", len(lb.Services), len(lb.Targets), lb.LoadBalancerType.Name, lb.Location.Name)
	}
	if len(st.Ingress) != 2 || st.Ingress[0].IP != lb.PublicNet.IPv4.IP.String() {
		t.Errorf("status = %+v", st.Ingress)
	}
	if !hasEvent(ev.events(), "Normal LoadBalancerCreated") {
		t.Errorf("no LoadBalancerCreated event")
	}
	if lb.PublicNet.IPv6.DNSPtr != "lb6.example.com" {
		t.Errorf("IPv6 PTR = %q", lb.PublicNet.IPv6.DNSPtr)
	}

	ev.emu.ResetRequests()
	st2 := ev.mustEnsure(svc)
	counts := ev.emu.Counts()
	t.Logf("no-op: %d mutating, %d reads: %v", ev.emu.MutatingRequests(), reads(counts), counts)
	if ev.emu.MutatingRequests() != 0 {
		t.Errorf("an unchanged load balancer made %d mutating requests: %v", ev.emu.MutatingRequests(), counts)
	}
	if n := reads(counts); n < 1 || n > 2 {
		t.Errorf("an unchanged load balancer cost %d reads, want 1-2: %v", n, counts)
	}
	if len(st2.Ingress) != len(st.Ingress) {
		t.Errorf("status changed: %v vs %v", st2.Ingress, st.Ingress)
	}
	if err := ev.lbs.UpdateLoadBalancer(context.Background(), clusterName, svc, ev.nodes); err != nil || ev.emu.MutatingRequests() != 0 {
		t.Errorf("UpdateLoadBalancer: %v, %d mutating", err, ev.emu.MutatingRequests())
	}
}

// TestEnsureLoadBalancer_EveryAnnotation applies one change after another to a live load
// balancer; after each, a second reconcile must find nothing to do (the emulator holds exactly
// what the Service asks for) and the check must hold.
func TestEnsureLoadBalancer_PrivateCreateIsOneRequest(t *testing.T) {
	ev := newEnv(t, withNetworkEnv)
	svc := newService("web", withPorts(80), withAnnotation(annotation.LBUsePrivateIP, "true"), withAnnotation(annotation.LBDisablePublicNetwork, "true"))
	st := ev.mustEnsure(svc)
	if n := ev.emu.MutatingRequests(); n != 1 {
		t.Errorf("%d mutating requests, want 1 (network, listener and private targets inline): %v", n, ev.emu.Counts())
	}
	lb := ev.onlyLB()
	if lb.PublicNet.Enabled || len(lb.PrivateNet) != 1 || len(lb.Targets) != 2 || !lb.Targets[0].UsePrivateIP {
		t.Errorf("public %v, networks %+v, targets %+v", lb.PublicNet.Enabled, lb.PrivateNet, lb.Targets)
	}
	if len(st.Ingress) != 1 || st.Ingress[0].IP != lb.PrivateNet[0].IP.String() {
		t.Errorf("status = %+v, want the private IP only", st.Ingress)
	}
}

func TestEnsureLoadBalancer_EveryAnnotation(t *testing.T) {
	ev := newEnv(t, withNetworkEnv)
	svc := newService("web", withPorts(80))
	ev.mustEnsure(svc)
	id := ev.onlyLB().ID

	steps := []struct {
		name  string
		tweak serviceTweak
		check func(*hcloud.LoadBalancer) bool
		ops   []string // the mutating routes the change costs
	}{
		{"algorithm-type changes the algorithm", withAnnotation(annotation.LBAlgorithmType, "least_connections"),
			func(lb *hcloud.LoadBalancer) bool {
				return lb.Algorithm.Type == hcloud.LoadBalancerAlgorithmTypeLeastConnections
			},
			[]string{"POST /v1/load_balancers/{id}/actions/change_algorithm"}},
		{"type changes the type", withAnnotation(annotation.LBType, "lb21"),
			func(lb *hcloud.LoadBalancer) bool { return lb.LoadBalancerType.Name == "lb21" },
			[]string{"POST /v1/load_balancers/{id}/actions/change_type"}},
		{"a removed type annotation falls back to HCLOUD_LOAD_BALANCERS_TYPE (official)", withoutAnnotation(annotation.LBType),
			func(lb *hcloud.LoadBalancer) bool { return lb.LoadBalancerType.Name == "lb11" },
			[]string{"POST /v1/load_balancers/{id}/actions/change_type"}},
		{"uses-proxyprotocol updates the listener", withAnnotation(annotation.LBSvcProxyProtocol, "true"),
			func(lb *hcloud.LoadBalancer) bool { return lb.Services[0].Proxyprotocol },
			[]string{"POST /v1/load_balancers/{id}/actions/update_service"}},
		{"health check settings update the listener", func(s *corev1.Service) {
			withAnnotation(annotation.LBSvcHealthCheckInterval, "20s")(s)
			withAnnotation(annotation.LBSvcHealthCheckTimeout, "7")(s)
			withAnnotation(annotation.LBSvcHealthCheckRetries, "5")(s)
			withAnnotation(annotation.LBSvcHealthCheckPort, "31999")(s)
		}, func(lb *hcloud.LoadBalancer) bool {
			hc := lb.Services[0].HealthCheck
			return hc.Interval.Seconds() == 20 && hc.Timeout.Seconds() == 7 && hc.Retries == 5 && hc.Port == 31999
		}, []string{"POST /v1/load_balancers/{id}/actions/update_service"}},
		{"http protocol with an http health check updates the listener", func(s *corev1.Service) {
			withAnnotation(annotation.LBSvcProtocol, "http")(s)
			withAnnotation(annotation.LBSvcHealthCheckProtocol, "http")(s)
			withAnnotation(annotation.LBSvcHealthCheckHTTPPath, "/healthz")(s)
			withAnnotation(annotation.LBSvcHealthCheckHTTPDomain, "example.com")(s)
			withAnnotation(annotation.LBSvcHealthCheckHTTPStatusCodes, "2??,3??")(s)
			withAnnotation(annotation.LBSvcHTTPStickySessions, "true")(s)
			withAnnotation(annotation.LBSvcHTTPCookieName, "SRV")(s)
			withAnnotation(annotation.LBSvcHTTPCookieLifetime, "600")(s)
		}, func(lb *hcloud.LoadBalancer) bool {
			s := lb.Services[0]
			return s.Protocol == "http" && s.HealthCheck.HTTP != nil && s.HealthCheck.HTTP.Path == "/healthz" &&
				s.HTTP.StickySessions && s.HTTP.CookieName == "SRV" && s.HTTP.CookieLifetime.Seconds() == 600
		}, []string{"POST /v1/load_balancers/{id}/actions/update_service"}},
		{"ipv4-rdns sets the PTR record", withAnnotation(annotation.LBPublicIPv4RDNS, "lb.example.com"),
			func(lb *hcloud.LoadBalancer) bool { return lb.PublicNet.IPv4.DNSPtr == "lb.example.com" },
			[]string{"POST /v1/load_balancers/{id}/actions/change_dns_ptr"}},
		{"use-private-ip re-adds the targets on private IPs", withAnnotation(annotation.LBUsePrivateIP, "true"),
			func(lb *hcloud.LoadBalancer) bool {
				return len(lb.Targets) == 2 && lb.Targets[0].UsePrivateIP && lb.Targets[1].UsePrivateIP
			},
			[]string{"POST /v1/load_balancers/{id}/actions/remove_target", "POST /v1/load_balancers/{id}/actions/add_target"}},
		{"private-ipv4 re-attaches with the IP", withAnnotation(annotation.LBPrivateIPv4, "10.0.0.99"),
			func(lb *hcloud.LoadBalancer) bool {
				return len(lb.PrivateNet) == 1 && lb.PrivateNet[0].IP.String() == "10.0.0.99"
			},
			[]string{"POST /v1/load_balancers/{id}/actions/detach_from_network", "POST /v1/load_balancers/{id}/actions/attach_to_network"}},
		{"disable-public-network disables the public interface", withAnnotation(annotation.LBDisablePublicNetwork, "true"),
			func(lb *hcloud.LoadBalancer) bool { return !lb.PublicNet.Enabled },
			[]string{"POST /v1/load_balancers/{id}/actions/disable_public_interface"}},
		{"removing disable-public-network leaves the interface as it is (official)", withoutAnnotation(annotation.LBDisablePublicNetwork),
			func(lb *hcloud.LoadBalancer) bool { return !lb.PublicNet.Enabled }, nil},
		{"disable-public-network false enables it again", withAnnotation(annotation.LBDisablePublicNetwork, "false"),
			func(lb *hcloud.LoadBalancer) bool { return lb.PublicNet.Enabled },
			[]string{"POST /v1/load_balancers/{id}/actions/enable_public_interface"}},
		{"node-selector removes unmatched nodes", withAnnotation(annotation.LBNodeSelector, "role=edge"),
			func(lb *hcloud.LoadBalancer) bool { return len(lb.Targets) == 0 },
			[]string{"POST /v1/load_balancers/{id}/actions/remove_target"}},
		{"a new port adds a listener", func(s *corev1.Service) {
			withoutAnnotation(annotation.LBNodeSelector)(s)
			withPorts(8080)(s)
		}, func(lb *hcloud.LoadBalancer) bool { return len(lb.Services) == 2 && len(lb.Targets) == 2 },
			[]string{"POST /v1/load_balancers/{id}/actions/add_service", "POST /v1/load_balancers/{id}/actions/add_target"}},
		{"a removed port deletes its listener", func(s *corev1.Service) { s.Spec.Ports = s.Spec.Ports[1:] },
			func(lb *hcloud.LoadBalancer) bool { return len(lb.Services) == 1 && lb.Services[0].ListenPort == 8080 },
			[]string{"POST /v1/load_balancers/{id}/actions/delete_service"}},
		{"the name annotation renames the same load balancer", withAnnotation(annotation.LBName, "shop-web"),
			func(lb *hcloud.LoadBalancer) bool { return lb.Name == "shop-web" },
			[]string{"PUT /v1/load_balancers/{id}"}},
		{"status-only annotations change nothing", func(s *corev1.Service) {
			withAnnotation(annotation.LBIPv6Disabled, "true")(s)
			withAnnotation(annotation.LBDisablePrivateIngress, "true")(s)
			withAnnotation(annotation.LBHostname, "lb.example.com")(s)
		}, func(*hcloud.LoadBalancer) bool { return true }, nil},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.tweak(svc)
			ev.emu.ResetRequests()
			ev.mustEnsure(svc)
			lb := ev.onlyLB()
			if lb.ID != id {
				t.Fatalf("load balancer replaced: id %d, want %d", lb.ID, id)
			}
			if !st.check(lb) {
				t.Errorf("change not applied: %+v", lb)
			}
			counts := ev.emu.Counts()
			t.Logf("%d mutating, %d reads: %v", ev.emu.MutatingRequests(), reads(counts), counts)
			expected := 0
			for _, op := range st.ops {
				if counts[op] == 0 {
					t.Errorf("no %s: %v", op, counts)
				}
				expected += counts[op]
			}
			if n := ev.emu.MutatingRequests(); n != expected {
				t.Errorf("%d mutating requests, want only %v: %v", n, st.ops, counts)
			}
			if counts["GET /v1/load_balancers/{id}"] != 0 {
				t.Errorf("reloaded the load balancer; the run knows what the status needs: %v", counts)
			}
			ev.emu.ResetRequests()
			ev.mustEnsure(svc)
			if ev.emu.MutatingRequests() != 0 {
				t.Errorf("not converged: the next reconcile made %d mutating requests: %v", ev.emu.MutatingRequests(), ev.emu.Counts())
			}
		})
	}
	st := ev.mustEnsure(svc)
	if len(st.Ingress) != 1 || st.Ingress[0].Hostname != "lb.example.com" {
		t.Errorf("status = %+v", st.Ingress)
	}
}

func TestEnsureLoadBalancer_AdoptsAnOfficialLoadBalancer(t *testing.T) {
	ev := newEnv(t)
	svc := newService("web", withPorts(80))
	id, err := ev.emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: cloudprovider.DefaultLoadBalancerName(svc), Labels: map[string]string{"team": "shop"}})
	if err != nil {
		t.Fatal(err)
	}
	ev.mustEnsure(svc)
	lb := ev.onlyLB()
	if lb.ID != id || lb.Labels[lbplan.LabelServiceUID] != testUID || lb.Labels["team"] != "shop" {
		t.Errorf("not adopted: id %d labels %v", lb.ID, lb.Labels)
	}
	if ev.emu.Counts()["POST /v1/load_balancers"] != 0 {
		t.Errorf("created a second load balancer")
	}
	ev.emu.ResetRequests()
	ev.mustEnsure(svc)
	if ev.emu.MutatingRequests() != 0 || ev.emu.Counts()["GET /v1/load_balancers"] != 1 {
		t.Errorf("after adoption: %v", ev.emu.Counts())
	}
}

func TestEnsureLoadBalancer_FindsAnOfficialLoadBalancerByLabel(t *testing.T) {
	ev := newEnv(t)
	id, err := ev.emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: "legacy", Labels: map[string]string{lbplan.LabelServiceUID: testUID}})
	if err != nil {
		t.Fatal(err)
	}
	ev.mustEnsure(newService("web", withPorts(80)))
	lb := ev.onlyLB()
	if lb.ID != id || lb.Name != "legacy" || len(lb.Services) != 1 {
		t.Errorf("id %d name %q services %d: a default name must not rename", lb.ID, lb.Name, len(lb.Services))
	}
	if c := ev.emu.Counts(); c["POST /v1/load_balancers"] != 0 || c["PUT /v1/load_balancers/{id}"] != 0 {
		t.Errorf("counts = %v", c)
	}
}

func TestEnsureLoadBalancer_DenyAllChangesNothing(t *testing.T) {
	ev := newEnv(t, withNetworkEnv)
	ev.decider.set(true)
	svc := newService("web", withPorts(80))
	_, err := ev.ensure(svc)
	if !errors.Is(err, policy.ErrDenied) {
		t.Fatalf("err = %v, want ErrDenied", err)
	}
	if ev.emu.MutatingRequests() != 0 || len(ev.emu.LoadBalancers()) != 0 {
		t.Fatalf("%d mutating requests under deny-all", ev.emu.MutatingRequests())
	}
	events := ev.events()
	if !hasEvent(events, "Warning PolicyDenied") || !strings.Contains(strings.Join(events, "\n"), "create(") {
		t.Errorf("events = %v", events)
	}
	var denied int
	for _, e := range events {
		if strings.HasPrefix(e, "Warning PolicyDenied") {
			denied++
		}
	}
	if denied != 1 {
		t.Errorf("%d PolicyDenied events, want one for the whole plan", denied)
	}
}

// TestEnsureLoadBalancer_DeniedTypeChangeConverges: a denied type change fails alone (the
// algorithm change, which does not need it, is applied) and converges once it is allowed.
func TestEnsureLoadBalancer_DeniedTypeChangeConverges(t *testing.T) {
	ev := newEnv(t)
	svc := newService("web", withPorts(80))
	ev.mustEnsure(svc)
	ev.decider.set(false, "change_type")
	withAnnotation(annotation.LBType, "lb21")(svc)
	withAnnotation(annotation.LBAlgorithmType, "least_connections")(svc)
	ev.emu.ResetRequests()
	if _, err := ev.ensure(svc); !errors.Is(err, policy.ErrDenied) {
		t.Fatalf("err = %v, want ErrDenied", err)
	}
	lb := ev.onlyLB()
	if c := ev.emu.Counts(); ev.emu.MutatingRequests() != 1 || c["POST /v1/load_balancers/{id}/actions/change_algorithm"] != 1 ||
		lb.LoadBalancerType.Name != "lb11" || lb.Algorithm.Type != hcloud.LoadBalancerAlgorithmTypeLeastConnections {
		t.Fatalf("want the algorithm changed and the type not: %v", c)
	}
	ev.decider.set(false)
	ev.mustEnsure(svc)
	lb = ev.onlyLB()
	if lb.LoadBalancerType.Name != "lb21" || lb.Algorithm.Type != hcloud.LoadBalancerAlgorithmTypeLeastConnections {
		t.Errorf("not converged: type %s algorithm %s", lb.LoadBalancerType.Name, lb.Algorithm.Type)
	}
}

func TestEnsureLoadBalancer_BadInputChangesNothing(t *testing.T) {
	tests := []struct {
		name       string
		svc        *corev1.Service
		wantErr    string
		wantReason string
	}{
		{"a bad annotation value raises InvalidAnnotation", newService("web", withPorts(80), withAnnotation(annotation.LBAlgorithmType, "random")),
			`invalid value for "load-balancer.hetzner.cloud/algorithm-type": "random"`, "Warning InvalidAnnotation"},
		{"an unknown type is refused before any mutation", newService("web", withPorts(80), withAnnotation(annotation.LBType, "lb99")),
			`"lb99" is not a load balancer type (known, case-sensitive: lb11, lb21, lb31)`, "Warning InvalidAnnotation"},
		{"a name the API would refuse is refused before any mutation", newService("web", withPorts(80), withAnnotation(annotation.LBName, strings.Repeat("n", 129))),
			`invalid value for "load-balancer.hetzner.cloud/name"`, "Warning InvalidAnnotation"},
		{"use-private-ip without a network is refused", newService("web", withPorts(80), withAnnotation(annotation.LBUsePrivateIP, "true")),
			`"load-balancer.hetzner.cloud/use-private-ip" needs a network`, "Warning InvalidAnnotation"},
		{"disable-public-network without a network is refused", newService("web", withPorts(80), withAnnotation(annotation.LBDisablePublicNetwork, "true")),
			`"load-balancer.hetzner.cloud/disable-public-network" needs a network`, "Warning InvalidAnnotation"},
		{"negative health check retries are refused", newService("web", withPorts(80), withAnnotation(annotation.LBSvcHealthCheckRetries, "-1")),
			`invalid value for "load-balancer.hetzner.cloud/health-check-retries": -1`, "Warning InvalidAnnotation"},
		{"a negative health check interval is refused", newService("web", withPorts(80), withAnnotation(annotation.LBSvcHealthCheckInterval, "-5s")),
			`invalid value for "load-balancer.hetzner.cloud/health-check-interval"`, "Warning InvalidAnnotation"},
		{"an empty cookie name is refused", newService("web", withPorts(80), withAnnotation(annotation.LBSvcProtocol, "http"), withAnnotation(annotation.LBSvcHTTPCookieName, "")),
			`invalid value for "load-balancer.hetzner.cloud/http-cookie-name"`, "Warning InvalidAnnotation"},
		{"a status code list with an empty element is refused", newService("web", withPorts(80), withAnnotation(annotation.LBSvcHealthCheckProtocol, "http"), withAnnotation(annotation.LBSvcHealthCheckHTTPStatusCodes, "200,")),
			`invalid value for "load-balancer.hetzner.cloud/http-status-codes"`, "Warning InvalidAnnotation"},
		{"a bad ipv6-disabled is refused before any write", newService("web", withPorts(80), withAnnotation(annotation.LBIPv6Disabled, "yes")),
			`invalid value for "load-balancer.hetzner.cloud/ipv6-disabled"`, "Warning InvalidAnnotation"},
		{"an unknown certificate name is refused", newService("web", withPorts(443), withAnnotation(annotation.LBSvcProtocol, "https"), withAnnotation(annotation.LBSvcHTTPCertificates, "nope")),
			`certificate "nope" not found`, "Warning InvalidAnnotation"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t)
			_, err := ev.ensure(tc.svc)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if ev.emu.MutatingRequests() != 0 {
				t.Errorf("%d mutating requests", ev.emu.MutatingRequests())
			}
			if events := ev.events(); !hasEvent(events, tc.wantReason) {
				t.Errorf("events = %v", events)
			}
		})
	}
}

// TestEnsureLoadBalancer_LocationIsCreateTimeOnly: a later location change is ignored, as the
// official CCM ignores it (moving needs a new load balancer with new addresses).
// TestEnsureLoadBalancer_SendsOnWhatTheOfficialSendsOn: values the official CCM does not check
// reach the API (or the Service status) as with the official; a refusal names the annotation.
func TestEnsureLoadBalancer_SendsOnWhatTheOfficialSendsOn(t *testing.T) {
	tests := []struct {
		name    string
		svc     *corev1.Service
		wantErr string // "" = success
		check   func(*testing.T, *env, *corev1.LoadBalancerStatus)
	}{
		{"a hostname that is no DNS name goes to the status", newService("web", withPorts(80), withAnnotation(annotation.LBHostname, "not a host")), "",
			func(t *testing.T, ev *env, st *corev1.LoadBalancerStatus) {
				if len(st.Ingress) != 1 || st.Ingress[0].Hostname != "not a host" || st.Ingress[0].IP != "" {
					t.Errorf("status = %+v", st.Ingress)
				}
			}},
		{"https without certificates is created (TLS passthrough)", newService("web", withPorts(443), withAnnotation(annotation.LBSvcProtocol, "https")), "",
			func(t *testing.T, ev *env, _ *corev1.LoadBalancerStatus) {
				lb := ev.onlyLB()
				if len(lb.Services) != 1 || lb.Services[0].Protocol != hcloud.LoadBalancerServiceProtocolHTTPS || len(lb.Services[0].HTTP.Certificates) != 0 {
					t.Errorf("services = %+v", lb.Services)
				}
			}},
		{"an idle timeout the API refuses names the annotation", newService("web", withPorts(80), withAnnotation(annotation.LBSvcProtocol, "http"), withAnnotation(annotation.LBSvcHTTPTimeoutIdle, "10s")),
			`http.timeout_idle (timeout_idle must be between 30 and 300 seconds, got 10) (check "load-balancer.hetzner.cloud/http-timeout-idle")`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t)
			st, err := ev.ensure(tc.svc)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("EnsureLoadBalancer: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if events := ev.events(); hasEvent(events, "Warning InvalidAnnotation") {
				t.Errorf("events = %v, want no InvalidAnnotation", events)
			}
			if tc.check != nil {
				tc.check(t, ev, st)
			}
		})
	}
}

func TestEnsureLoadBalancer_LocationIsCreateTimeOnly(t *testing.T) {
	ev := newEnv(t)
	svc := newService("web", withPorts(80))
	ev.mustEnsure(svc)
	withAnnotation(annotation.LBLocation, "nbg1")(svc)
	ev.emu.ResetRequests()
	if _, err := ev.ensure(svc); err != nil {
		t.Fatalf("err = %v", err)
	}
	if ev.emu.MutatingRequests() != 0 {
		t.Errorf("%d mutating requests", ev.emu.MutatingRequests())
	}
}

func TestEnsureLoadBalancer_ManagedCertificate(t *testing.T) {
	ev := newEnv(t)
	svc := newService("web", withPorts(443), withAnnotation(annotation.LBSvcProtocol, "https"),
		withAnnotation(annotation.LBSvcHTTPCertificateType, "managed"), withAnnotation(annotation.LBSvcHTTPManagedCertificateDomains, "shop.example.com"))
	ev.mustEnsure(svc)
	if c := ev.emu.Counts(); ev.emu.MutatingRequests() != 2 || c["POST /v1/certificates"] != 1 || c["POST /v1/load_balancers"] != 1 {
		t.Errorf("create with a managed certificate: %v, want the certificate, then the create carrying its listener", c)
	}
	certs, err := ev.client.Certificate.All(context.Background())
	if err != nil || len(certs) != 1 || certs[0].Type != hcloud.CertificateTypeManaged || certs[0].Name != "ccm-managed-certificate-"+testUID {
		t.Fatalf("certificates = %+v, %v", certs, err)
	}
	lb := ev.onlyLB()
	if got := lb.Services[0].HTTP.Certificates; len(got) != 1 || got[0].ID != certs[0].ID {
		t.Errorf("listener certificates = %+v, want %d", got, certs[0].ID)
	}
	ev.emu.ResetRequests()
	ev.mustEnsure(svc)
	if ev.emu.MutatingRequests() != 0 || reads(ev.emu.Counts()) != 2 {
		t.Errorf("unchanged managed https: %v", ev.emu.Counts())
	}
}

func TestEnsureLoadBalancer_UploadedCertificatesByIDAndName(t *testing.T) {
	ev := newEnv(t)
	certPEM, keyPEM := testutil.SelfSignedPEM(t, "shop.example.com")
	var ids []int64
	for _, name := range []string{"shop", "extra"} {
		c, _, err := ev.client.Certificate.Create(context.Background(), hcloud.CertificateCreateOpts{Name: name, Certificate: certPEM, PrivateKey: keyPEM})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	svc := newService("web", withPorts(443), withAnnotation(annotation.LBSvcProtocol, "https"),
		withAnnotation(annotation.LBSvcHTTPCertificates, fmt.Sprintf("shop, %d", ids[1])))
	ev.mustEnsure(svc)
	got := ev.onlyLB().Services[0].HTTP.Certificates
	if len(got) != 2 || got[0].ID+got[1].ID != ids[0]+ids[1] {
		t.Errorf("listener certificates = %+v, want %v", got, ids)
	}
	ev.emu.ResetRequests()
	ev.mustEnsure(svc)
	if ev.emu.MutatingRequests() != 0 || reads(ev.emu.Counts()) != 2 {
		t.Errorf("unchanged https (one name to resolve): %v", ev.emu.Counts())
	}
}

func TestEnsureLoadBalancer_UnsupportedProtocol(t *testing.T) {
	ev := newEnv(t)
	svc := newService("dns", withPorts(80), func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30053})
	})
	ev.mustEnsure(svc)
	if len(ev.onlyLB().Services) != 1 || !hasEvent(ev.events(), "Warning UnsupportedProtocolConfigured") {
		t.Errorf("UDP port not reported")
	}
}

func TestEnsureLoadBalancer_MaxTargetsReachedContinues(t *testing.T) {
	ev := newEnv(t, withServers(3))
	// The API refuses the create with its targets inline, then the third target on its own.
	ev.emu.AddFault(hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers", Times: 1, Code: "resource_limit_exceeded"})
	ev.emu.AddFault(hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers/*/actions/add_target", Skip: 2, Times: 1, Code: "resource_limit_exceeded"})
	svc := newService("web", withPorts(80))
	ev.mustEnsure(svc)
	if n := len(ev.onlyLB().Targets); n != 2 {
		t.Errorf("%d targets, want 2", n)
	}
	if !hasEvent(ev.events(), "Warning MaxTargetsReached") {
		t.Errorf("no MaxTargetsReached event")
	}
}

func TestEnsureLoadBalancer_LockedIsRetryable(t *testing.T) {
	ev := newEnv(t)
	svc := newService("web", withPorts(80))
	ev.mustEnsure(svc)
	ev.emu.AddFault(hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers/*/actions/add_service", Times: 1, Code: "locked"})
	withPorts(8080)(svc)
	_, err := ev.ensure(svc)
	var retry interface{ RetryAfter() time.Duration }
	if !errors.As(err, &retry) || !strings.HasPrefix(err.Error(), "add_service(8080): ") {
		t.Fatalf("err = %v, want a retry error prefixed with the op", err)
	}
	ev.mustEnsure(svc) // the next reconcile finishes the plan
	if len(ev.onlyLB().Services) != 2 {
		t.Errorf("not converged")
	}
}

func TestEnsureLoadBalancer_LockedCreateIsRetryable(t *testing.T) {
	ev := newEnv(t)
	ev.emu.AddFault(hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers", Times: 1, Code: "locked"})
	svc := newService("web", withPorts(80))
	_, err := ev.ensure(svc)
	var retry interface{ RetryAfter() time.Duration }
	if !errors.As(err, &retry) || !strings.HasPrefix(err.Error(), "create(") {
		t.Fatalf("err = %v, want a retry error prefixed with the op", err)
	}
	if n := len(ev.emu.LoadBalancers()); n != 0 {
		t.Fatalf("%d load balancers after a refused create", n)
	}
	ev.mustEnsure(svc)
	if lb := ev.onlyLB(); len(lb.Services) != 1 || len(lb.Targets) != 2 {
		t.Errorf("not converged: %d services, %d targets", len(lb.Services), len(lb.Targets))
	}
}

func TestGetLoadBalancerName(t *testing.T) {
	svc := newService("web", withPorts(80))
	def := cloudprovider.DefaultLoadBalancerName(svc)
	tests := []struct {
		name      string
		svc       *corev1.Service
		namer     loadbalancer.Namer
		want      string
		wantEvent string
	}{
		{"without annotation or plugin the default name is used", svc, nil, def, ""},
		{"the annotation wins over the plugin", newService("web", withAnnotation(annotation.LBName, "mine")),
			namerFunc(func(context.Context, plugins.LoadBalancerNameInput) (string, error) { return "plugin", nil }), "mine", ""},
		{"the plugin names the load balancer", svc,
			namerFunc(func(_ context.Context, in plugins.LoadBalancerNameInput) (string, error) {
				return in.ClusterName + "-" + in.Service.Namespace + "-" + in.Service.Name, nil
			}), "kubernetes-shop-web", ""},
		{"a failing plugin falls back with PluginFailed", svc,
			namerFunc(func(context.Context, plugins.LoadBalancerNameInput) (string, error) { return "", errors.New("trap") }), def, "Warning PluginFailed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t, withNamer(tc.namer), withServers(0))
			if got := ev.lbs.GetLoadBalancerName(context.Background(), clusterName, tc.svc); got != tc.want {
				t.Errorf("name = %q, want %q", got, tc.want)
			}
			if tc.wantEvent != "" && !hasEvent(ev.events(), tc.wantEvent) {
				t.Errorf("no %s event", tc.wantEvent)
			}
		})
	}
}

func TestEnsureLoadBalancer_PluginRenameKeepsIdentity(t *testing.T) {
	name := "first"
	ev := newEnv(t, withNamer(namerFunc(func(context.Context, plugins.LoadBalancerNameInput) (string, error) { return name, nil })))
	svc := newService("web", withPorts(80))
	ev.mustEnsure(svc)
	id := ev.onlyLB().ID
	name = "second"
	ev.mustEnsure(svc)
	lb := ev.onlyLB()
	if lb.ID != id || lb.Name != "second" {
		t.Errorf("id %d name %q, want %d second", lb.ID, lb.Name, id)
	}
}

func TestUpdateLoadBalancer_MissingIsLeftToEnsure(t *testing.T) {
	ev := newEnv(t)
	if err := ev.lbs.UpdateLoadBalancer(context.Background(), clusterName, newService("web", withPorts(80)), ev.nodes); err != nil {
		t.Fatal(err)
	}
	if ev.emu.MutatingRequests() != 0 {
		t.Errorf("%d mutating requests", ev.emu.MutatingRequests())
	}
}

func TestGetLoadBalancer(t *testing.T) {
	ev := newEnv(t)
	svc := newService("web", withPorts(80), withAnnotation(annotation.LBIPv6Disabled, "true"))
	if _, exists, err := ev.lbs.GetLoadBalancer(context.Background(), clusterName, svc); exists || err != nil {
		t.Fatalf("exists %v err %v before create", exists, err)
	}
	ev.mustEnsure(svc)
	st, exists, err := ev.lbs.GetLoadBalancer(context.Background(), clusterName, svc)
	if !exists || err != nil || len(st.Ingress) != 1 {
		t.Errorf("exists %v err %v status %+v", exists, err, st)
	}
}

func TestGetLoadBalancer_MoreThanOneIsAnError(t *testing.T) {
	ev := newEnv(t)
	for _, n := range []string{"one", "two"} {
		if _, err := ev.emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: n, Labels: map[string]string{lbplan.LabelServiceUID: testUID}}); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := ev.lbs.GetLoadBalancer(context.Background(), clusterName, newService("web"))
	if !errors.Is(err, loadbalancer.ErrNonUniqueResult) {
		t.Errorf("err = %v", err)
	}
}

func TestEnsureLoadBalancerDeleted(t *testing.T) {
	ev := newEnv(t)
	svc := newService("web", withPorts(80))
	ev.mustEnsure(svc)
	other, err := ev.emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: "not-ours"})
	if err != nil {
		t.Fatal(err)
	}
	ev.emu.ResetRequests()
	if err := ev.lbs.EnsureLoadBalancerDeleted(context.Background(), clusterName, svc); err != nil {
		t.Fatal(err)
	}
	t.Logf("delete: %v", ev.emu.Counts())
	lbs := ev.emu.LoadBalancers()
	if len(lbs) != 1 || lbs[0].ID != other {
		t.Errorf("remaining load balancers: %+v", lbs)
	}
	if ev.emu.Counts()["GET /v1/actions"] == 0 {
		t.Errorf("the delete action was not awaited: %v", ev.emu.Counts())
	}
	if err := ev.lbs.EnsureLoadBalancerDeleted(context.Background(), clusterName, svc); err != nil {
		t.Errorf("second delete: %v", err)
	}
}

func TestEnsureLoadBalancerDeleted_Protected(t *testing.T) {
	ev := newEnv(t)
	svc := newService("web", withPorts(80))
	ev.mustEnsure(svc)
	lb := ev.onlyLB()
	a, _, err := ev.client.LoadBalancer.ChangeProtection(context.Background(), lb, hcloud.LoadBalancerChangeProtectionOpts{Delete: hcloud.Ptr(true)})
	if err == nil {
		err = ev.client.Action.WaitFor(context.Background(), a)
	}
	if err != nil {
		t.Fatal(err)
	}
	ev.emu.ResetRequests()
	if err := ev.lbs.EnsureLoadBalancerDeleted(context.Background(), clusterName, svc); err != nil {
		t.Fatalf("err = %v, want nil (kept, as the official CCM)", err)
	}
	if ev.emu.MutatingRequests() != 0 || len(ev.emu.LoadBalancers()) != 1 || !hasEvent(ev.events(), "Warning DeleteProtected") {
		t.Errorf("protected load balancer: %v", ev.emu.Counts())
	}
}

// fixedNamer is a naming plugin that gives every Service the same name.
type fixedNamer string

func (n fixedNamer) LoadBalancerName(context.Context, plugins.LoadBalancerNameInput) (string, error) {
	return string(n), nil
}

// TestEnsureLoadBalancer_NeverTakesAnotherServicesLoadBalancer: a Service whose name (annotation
// or naming plugin) is another Service's load balancer gets a Warning and an error; the other
// load balancer is not relabelled, not changed, and deleting the newcomer does not delete it.
func TestEnsureLoadBalancer_NeverTakesAnotherServicesLoadBalancer(t *testing.T) {
	const otherUID = "11111111-2222-4333-8444-555555555555"
	tests := []struct {
		name  string
		opts  []envOption
		tweak serviceTweak
	}{
		{"by the name annotation", nil, withAnnotation(annotation.LBName, "shop-web")},
		{"by a naming plugin that gives two Services one name", []envOption{withNamer(fixedNamer("shop-web"))}, func(*corev1.Service) {}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t, tc.opts...)
			owner := newService("web", withPorts(80), withAnnotation(annotation.LBName, "shop-web"))
			ev.mustEnsure(owner)
			before := ev.onlyLB()
			ev.events()

			intruder := newService("other", withPorts(443), tc.tweak)
			intruder.Namespace, intruder.UID = "attacker", otherUID
			ev.emu.ResetRequests()
			_, err := ev.ensure(intruder)
			var conflict *loadbalancer.NameConflictError
			if !errors.As(err, &conflict) || conflict.OwnerUID != testUID {
				t.Fatalf("err = %v, want a NameConflictError naming the owner", err)
			}
			if !hasEvent(ev.events(), "Warning LoadBalancerNameConflict") {
				t.Error("no LoadBalancerNameConflict event on the newcomer")
			}
			if err := ev.lbs.UpdateLoadBalancer(context.Background(), clusterName, intruder, ev.nodes); err == nil {
				t.Error("UpdateLoadBalancer of the newcomer succeeded on another Service's load balancer")
			}
			if err := ev.lbs.EnsureLoadBalancerDeleted(context.Background(), clusterName, intruder); err != nil {
				t.Fatalf("EnsureLoadBalancerDeleted(newcomer) = %v", err)
			}
			if n := ev.emu.MutatingRequests(); n != 0 {
				t.Errorf("%d mutating requests for the newcomer: %v", n, ev.emu.Counts())
			}
			after := ev.onlyLB()
			if after.ID != before.ID || after.Labels[lbplan.LabelServiceUID] != testUID || len(after.Services) != 1 || after.Services[0].ListenPort != 80 {
				t.Errorf("owner's load balancer changed: %+v", after)
			}
		})
	}
}

// TestEnsureLoadBalancer_SubnetMustExist: a private-subnet-ip-range that is not a subnet of the
// network is refused before any write; one the CCM did not know yet (added after its start) is
// found by reading the network again.
func TestEnsureLoadBalancer_SubnetMustExist(t *testing.T) {
	ev := newEnv(t, withNetworkEnv)
	missing := newService("web", withPorts(80), withAnnotation(annotation.LBPrivateSubnetIPRange, "10.9.0.0/24"))
	if _, err := ev.ensure(missing); err == nil || !strings.Contains(err.Error(), "10.9.0.0/24 is not a subnet of network k8s") {
		t.Fatalf("err = %v, want the missing subnet named", err)
	}
	if n := ev.emu.MutatingRequests(); n != 0 {
		t.Fatalf("%d mutating requests for a missing subnet", n)
	}
	// The provider was built with the network as read at start, without its subnets (newEnv):
	// the subnet the emulator has is found by one more read.
	_, ipRange, _ := net.ParseCIDR("10.0.0.0/24")
	added := newService("web", withPorts(80), withAnnotation(annotation.LBPrivateSubnetIPRange, "10.0.0.0/24"))
	ev.mustEnsure(added)
	if lb := ev.onlyLB(); len(lb.PrivateNet) != 1 || !ipRange.Contains(lb.PrivateNet[0].IP) {
		t.Errorf("private net = %+v, want an IP in the added subnet", lb.PrivateNet)
	}
}

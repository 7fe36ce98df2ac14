package loadbalancer_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
)

// warningReasons is the set of Warning reasons in events ("Warning Reason message").
func warningReasons(events []string) []string {
	set := map[string]bool{}
	for _, e := range events {
		if f := strings.Fields(e); len(f) >= 2 && f[0] == corev1.EventTypeWarning {
			set[f[1]] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// TestWarningReasonsOnTheWayToAFailure: for input this CCM refuses before any write, the
// Warning reasons are those the official CCM emits on its way to the same failure (its
// reconcile order: type lookup first on a create and after the algorithm on an update,
// ReconcileHCLB, then services and targets for Ensure, targets and services for Update, status
// last), plus InvalidAnnotation. The Service has a UDP port, no type is configured, and one node
// has no provider ID.
func TestWarningReasonsOnTheWayToAFailure(t *testing.T) {
	const (
		unconfigured = "LoadBalancerTypeUnconfigured"
		udp          = "UnsupportedProtocolConfigured"
		unknown      = "UnknownProviderIDPrefix"
		invalid      = "InvalidAnnotation"
	)
	tests := []struct {
		name     string
		existing bool // the load balancer exists (created by a clean Ensure first)
		update   bool // UpdateLoadBalancer, else EnsureLoadBalancer
		bad      map[annotation.Name]string
		want     []string
		wantErr  bool
	}{
		{"create, bad algorithm: the type is read first", false, false, map[annotation.Name]string{annotation.LBAlgorithmType: "random"}, []string{invalid, unconfigured}, true},
		{"create, bad disable-public-network", false, false, map[annotation.Name]string{annotation.LBDisablePublicNetwork: "yes"}, []string{invalid, unconfigured}, true},
		{"create, bad protocol: the services step warns about UDP", false, false, map[annotation.Name]string{annotation.LBSvcProtocol: "udp"}, []string{invalid, udp, unconfigured}, true},
		{"create, bad use-private-ip: services ran, targets failed first", false, false, map[annotation.Name]string{annotation.LBUsePrivateIP: "yes"}, []string{invalid, udp, unconfigured}, true},
		{"create, bad ipv6-disabled: every step ran, the status failed", false, false, map[annotation.Name]string{annotation.LBIPv6Disabled: "yes"}, []string{invalid, udp, unconfigured, unknown}, true},
		{"create, empty name: the type is read before the create sends it", false, false, map[annotation.Name]string{annotation.LBName: ""}, []string{invalid, unconfigured}, true},
		{"create, name with spaces around", false, false, map[annotation.Name]string{annotation.LBName: " web "}, []string{invalid, unconfigured}, true},
		{"ensure, empty name: the rename fails before the type is read", true, false, map[annotation.Name]string{annotation.LBName: ""}, []string{invalid}, true},
		{"ensure, bad algorithm: fails before the type is read", true, false, map[annotation.Name]string{annotation.LBAlgorithmType: "random"}, []string{invalid}, true},
		{"ensure, bad health check port", true, false, map[annotation.Name]string{annotation.LBSvcHealthCheckPort: "x"}, []string{invalid, udp, unconfigured}, true},
		{"update, bad algorithm", true, true, map[annotation.Name]string{annotation.LBAlgorithmType: "random"}, []string{invalid}, true},
		{"update, bad protocol: targets ran before services", true, true, map[annotation.Name]string{annotation.LBSvcProtocol: "udp"}, []string{invalid, udp, unconfigured, unknown}, true},
		{"update, bad use-private-ip: targets failed first", true, true, map[annotation.Name]string{annotation.LBUsePrivateIP: "yes"}, []string{invalid, unconfigured}, true},
		{"update without a load balancer does nothing", false, true, map[annotation.Name]string{annotation.LBAlgorithmType: "random"}, nil, false},
		{"ensure, nothing bad", true, false, nil, []string{udp, unconfigured, unknown}, false},
		{"update, nothing bad", true, true, nil, []string{udp, unconfigured, unknown}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t, func(c *envConfig) { c.cfg.Type = "" })
			nodes := append(slices.Clone(ev.nodes), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}})
			svc := newService("web", withPorts(80), func(s *corev1.Service) {
				s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30053})
			})
			ctx := context.Background()
			if tc.existing {
				if _, err := ev.lbs.EnsureLoadBalancer(ctx, clusterName, svc, nodes); err != nil {
					t.Fatal(err)
				}
				ev.events()
			}
			before := ev.emu.MutatingRequests()
			for k, v := range tc.bad {
				svc.Annotations[string(k)] = v
			}
			var err error
			if tc.update {
				err = ev.lbs.UpdateLoadBalancer(ctx, clusterName, svc, nodes)
			} else {
				_, err = ev.lbs.EnsureLoadBalancer(ctx, clusterName, svc, nodes)
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if tc.wantErr && ev.emu.MutatingRequests() != before {
				t.Errorf("%d mutating requests", ev.emu.MutatingRequests()-before)
			}
			events := ev.events()
			if got, want := warningReasons(events), slices.Sorted(slices.Values(tc.want)); !slices.Equal(got, want) {
				t.Errorf("Warning reasons = %v, want %v\n%s", got, want, strings.Join(events, "\n"))
			}
		})
	}
}

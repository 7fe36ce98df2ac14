package executor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// TestAPIRequests_AreWhatTheExecutorSends: the requests a plan lists at plan time
// (lbplan.Plan.APIRequests, which `hcloud-policy-ccm plan` shows) are the mutating requests
// the executor then sends, in order, with the placeholders of what only the create's answer
// knows (lbplan.PlaceholderID and PlaceholderIPv4 for the new load balancer's ID and address).
func TestAPIRequests_AreWhatTheExecutorSends(t *testing.T) {
	tests := []struct {
		name   string
		create bool // plan from nothing; else change the load balancer the first run created
		tweak  func(*corev1.Service)
	}{
		{"a create with a record after it", true, func(s *corev1.Service) {
			s.Annotations = map[string]string{"load-balancer.hetzner.cloud/ipv4-rdns": "lb.example.com"}
		}},
		{"an update: a port and the algorithm", false, func(s *corev1.Service) {
			s.Annotations = map[string]string{"load-balancer.hetzner.cloud/algorithm-type": "least_connections"}
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, NodePort: 30443})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := newEnv(t, allow)
			ctx := context.Background()
			svc := newService()
			if !tt.create {
				if _, err := ev.exec.Run(ctx, svc, ev.plan(t, svc, nil)); err != nil {
					t.Fatal(err)
				}
			}
			tt.tweak(svc)
			lb := ev.lbOrNil(t)
			plan := ev.plan(t, svc, lb)
			planned, err := plan.APIRequests()
			if err != nil {
				t.Fatalf("APIRequests: %v", err)
			}
			before := len(ev.emu.Requests())
			if _, err := ev.exec.Run(ctx, svc, plan); err != nil {
				t.Fatal(err)
			}
			created := ev.lbOrNil(t)
			var sent []string
			for _, r := range ev.emu.Requests()[before:] {
				if r.Method == "GET" {
					continue
				}
				line := r.Method + " " + strings.TrimPrefix(r.Path, "/v1") + " " + r.Body
				if tt.create {
					line = strings.ReplaceAll(line, fmt.Sprintf("/load_balancers/%d/", created.ID), fmt.Sprintf("/load_balancers/%d/", lbplan.PlaceholderID))
					line = strings.ReplaceAll(line, `"`+created.PublicNet.IPv4.IP.String()+`"`, `"`+lbplan.PlaceholderIPv4+`"`)
				}
				sent = append(sent, line)
			}
			var want []string
			for _, p := range planned {
				b, err := p.Request.JSON()
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, p.Request.Method+" "+p.Request.Path+" "+string(b))
			}
			if strings.Join(sent, "\n") != strings.Join(want, "\n") {
				t.Errorf("sent:\n%s\nplanned:\n%s", strings.Join(sent, "\n"), strings.Join(want, "\n"))
			}
			if len(want) < 2 {
				t.Errorf("planned %d requests, want a plan of at least 2", len(want))
			}
		})
	}
}

// lbOrNil is the one load balancer in the emulator, or nil.
func (ev *env) lbOrNil(t *testing.T) *hcloud.LoadBalancer {
	t.Helper()
	lbs, err := ev.client.LoadBalancer.All(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(lbs) == 0 {
		return nil
	}
	return lbs[0]
}

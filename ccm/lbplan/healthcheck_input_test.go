package lbplan_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// TestHealthCheckInput: the health check a policy sees on a listener (load_balancer.services[],
// final, listener) is the one the request body carries, with the environment defaults
// (HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_*) applied where no annotation is set, and null where
// nothing is sent. The body side is the create request's JSON, decoded without the planner.
func TestHealthCheckInput(t *testing.T) {
	envDefaults := config.LoadBalancer{Location: "fsn1", HealthCheckInterval: 5 * time.Second, HealthCheckTimeout: 3 * time.Second, HealthCheckRetries: 7}
	tests := []struct {
		name     string
		defaults config.LoadBalancer
		ann      map[annotation.Name]string
		want     input.LBHealthCheck
	}{
		{
			name: "no annotation, no environment default: the official CCM's plain tcp check on the node port",
			want: input.LBHealthCheck{Protocol: "tcp", Port: 30080},
		},
		{
			name:     "the environment defaults alone: interval, timeout and retries, the check on the listener's protocol",
			defaults: envDefaults,
			want:     input.LBHealthCheck{Protocol: "tcp", Port: 30080, Interval: new(5), Timeout: new(3), Retries: new(7)},
		},
		{
			name:     "annotations win over the environment defaults",
			defaults: envDefaults,
			ann: map[annotation.Name]string{
				annotation.LBSvcHealthCheckInterval: "20s", annotation.LBSvcHealthCheckRetries: "2",
			},
			want: input.LBHealthCheck{Protocol: "tcp", Port: 30080, Interval: new(20), Timeout: new(3), Retries: new(2)},
		},
		{
			name: "a duration is sent in whole seconds",
			ann:  map[annotation.Name]string{annotation.LBSvcHealthCheckTimeout: "2500ms"},
			want: input.LBHealthCheck{Protocol: "tcp", Port: 30080, Timeout: new(2)},
		},
		{
			name:     "an http check on another port with every http field",
			defaults: envDefaults,
			ann: map[annotation.Name]string{
				annotation.LBSvcHealthCheckProtocol: "http", annotation.LBSvcHealthCheckPort: "10254",
				annotation.LBSvcHealthCheckHTTPPath: "/healthz", annotation.LBSvcHealthCheckHTTPDomain: "example.com",
				annotation.LBSvcHealthCheckHTTPStatusCodes: "2??,301", annotation.LBSvcHealthCheckHTTPValidateCertificate: "true",
			},
			want: input.LBHealthCheck{Protocol: "http", Port: 10254, Interval: new(5), Timeout: new(3), Retries: new(7),
				HTTP: &input.LBHealthCheckHTTP{Domain: new("example.com"), Path: new("/healthz"), StatusCodes: []string{"2??", "301"}, TLS: new(true)}},
		},
		{
			name: "an http listener's check: the http object is sent, its unset fields are not",
			ann:  map[annotation.Name]string{annotation.LBSvcProtocol: "http", annotation.LBSvcHealthCheckInterval: "10s"},
			want: input.LBHealthCheck{Protocol: "http", Port: 30080, Interval: new(10), HTTP: &input.LBHealthCheckHTTP{}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService("web", withPorts(80))
			for k, v := range tc.ann {
				withAnnotation(k, v)(svc)
			}
			in := newInput(svc, withNodes())
			if tc.defaults != (config.LoadBalancer{}) {
				in.Defaults = tc.defaults
			}
			p, err := lbplan.Compute(mustDesired(t, in), nil)
			if err != nil {
				t.Fatal(err)
			}
			steps := p.Steps()
			if len(steps) != 1 || len(steps[0].LoadBalancer.Services) != 1 {
				t.Fatalf("want one create with one listener, got %v", p.Labels())
			}
			got := steps[0].LoadBalancer.Services[0].HealthCheck
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("load_balancer.services[0].health_check (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(got, steps[0].Final.Services[0].HealthCheck); diff != "" {
				t.Errorf("final differs from load_balancer on a create (-load_balancer +final):\n%s", diff)
			}
			reqs, err := p.APIRequests()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(inputJSON(t, got), sentHealthCheck(t, reqs[0])); diff != "" {
				t.Errorf("the policy's health check is not the body's (-input without nulls +body):\n%s", diff)
			}
		})
	}
}

// TestHealthCheckInput_UpdateKeepsWhatIsNotSent: update_service sends only the health check
// fields that are set; the API keeps the others, and the policy's listener and final show the
// kept values, as current does, not null.
func TestHealthCheckInput_UpdateKeepsWhatIsNotSent(t *testing.T) {
	svc := newService("web", withPorts(80), withAnnotation(annotation.LBSvcHealthCheckRetries, "5"))
	lb := newLB(func(lb *hcloud.LoadBalancer) { lb.Services[0].HealthCheck.Interval = 20 * time.Second })
	p, err := lbplan.Compute(mustDesired(t, newInput(svc)), lbplan.NewActual(lb))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"update_service(80)"}, p.Labels()); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	st := p.Steps()[0]
	cur := input.LBHealthCheck{Protocol: "tcp", Port: 30080, Interval: new(20), Timeout: new(10), Retries: new(3)}
	if diff := cmp.Diff(cur, st.Current.Services[0].HealthCheck); diff != "" {
		t.Errorf("current: the API's health check (-want +got):\n%s", diff)
	}
	after := input.LBHealthCheck{Protocol: "tcp", Port: 30080, Interval: new(20), Timeout: new(10), Retries: new(5)}
	for name, got := range map[string]input.LBHealthCheck{
		"listener": st.Listener.HealthCheck, "load_balancer": st.LoadBalancer.Services[0].HealthCheck, "final": st.Final.Services[0].HealthCheck,
	} {
		if diff := cmp.Diff(after, got); diff != "" {
			t.Errorf("%s: retries sent, interval and timeout kept (-want +got):\n%s", name, diff)
		}
	}
	reqs, err := p.APIRequests()
	if err != nil {
		t.Fatal(err)
	}
	b, err := reqs[0].Request.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		HealthCheck map[string]any `json:"health_check"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"protocol": "tcp", "port": 30080.0, "retries": 5.0}
	if diff := cmp.Diff(want, body.HealthCheck); diff != "" {
		t.Errorf("update_service body's health_check (-want +got):\n%s", diff)
	}
}

// inputJSON is hc as JSON without its null fields (a body leaves out what it does not send).
func inputJSON(t *testing.T, hc input.LBHealthCheck) map[string]any {
	t.Helper()
	b, err := json.Marshal(hc)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	dropNulls(m)
	return m
}

func dropNulls(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			dropNulls(v)
		}
	}
}

// sentHealthCheck is the health check of the first listener of a create request's body.
func sentHealthCheck(t *testing.T, r lbplan.PlannedRequest) map[string]any {
	t.Helper()
	b, err := r.Request.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Services []struct {
			HealthCheck map[string]any `json:"health_check"`
		} `json:"services"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Services) != 1 {
		t.Fatalf("%s: %d listeners in the body, want 1", r.Label, len(body.Services))
	}
	hc := body.Services[0].HealthCheck
	if h, ok := hc["http"].(map[string]any); ok {
		dropNulls(h)
	}
	return hc
}

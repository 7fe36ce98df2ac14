package executor

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/apireq"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/routeplan"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// sendsDelete says it is add_target and sends DELETE /load_balancers/{id}.
type sendsDelete struct{ lbplan.AddTarget }

func (sendsDelete) Request(a *lbplan.Actual, _ int64) (apireq.Request, error) {
	return apireq.Request{Method: "DELETE", Path: apireq.Fill(apireq.PathLoadBalancer, a.ID), Wait: true}, nil
}

// TestVetRequest: a request is sent only when its method and path are an endpoint of
// apireq.Endpoints with its mutation's action and operation, on the load balancer or network
// decided on.
func TestVetRequest(t *testing.T) {
	target := lbplan.AddTarget{Target: lbplan.Target{ServerID: 3}}
	lb := &lbplan.Actual{ID: 7}
	addTarget, _ := target.Request(lb, 0)
	r := routeplan.Route{Destination: netip.MustParsePrefix("10.244.1.0/24"), Gateway: netip.MustParseAddr("10.0.0.2")}
	tests := []struct {
		name    string
		m       step
		api     apireq.Request
		decided int64
		refused bool
	}{
		{"the request of the step decided", target, addTarget, 7, false},
		{"a create names no load balancer", lbplan.Create{Name: "x"}, apireq.Request{Method: "POST", Path: "/load_balancers"}, 0, false},
		{"a route on the network decided", routeplan.Add(r), routeplan.Add(r).Request(5), 5, false},
		{"another operation: a delete said to be add_target", target, apireq.Request{Method: "DELETE", Path: "/load_balancers/7"}, 7, true},
		{"another action: a create said to be an update", lbplan.Update{}, apireq.Request{Method: "POST", Path: "/load_balancers"}, 7, true},
		{"no endpoint of the table", target, apireq.Request{Method: "POST", Path: "/networks/7/actions/change_protection"}, 7, true},
		{"the path names no ID", target, apireq.Request{Method: "POST", Path: "/load_balancers/x/actions/add_target"}, 7, true},
		{"another load balancer", target, apireq.Post(apireq.PathLoadBalancerActions+"add_target", 8, nil), 7, true},
		{"a load balancer before the create", target, addTarget, 0, true},
		{"another network", routeplan.Add(r), routeplan.Add(r).Request(6), 5, true},
		{"a route said to be its delete", routeplan.Delete(r), routeplan.Add(r).Request(5), 5, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := vetRequest(tt.m, tt.api, tt.decided)
			if got := errors.Is(err, ErrRefused); got != tt.refused {
				t.Errorf("vetRequest = %v, want refused %v", err, tt.refused)
			}
		})
	}
}

// TestSend_RefusesARequestThatIsNotTheDecidedStep is the request check of issue 30 against the
// emulator, below the check of kinds (which Run makes first and which this test skips): send
// refuses a request whose endpoint is not its mutation's before it leaves the process, and
// counts it; the load balancer survives.
func TestSend_RefusesARequestThatIsNotTheDecidedStep(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t)
	id, err := emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := hcloudclient.New(hcloudclient.Options{Config: config.HCloud{Endpoint: endpoint, Token: emu.Token(),
		PollInterval: time.Millisecond, RetryInterval: time.Millisecond, Timeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	x, err := New(Options{Conn: conn, Decider: policy.AllowAll{}})
	if err != nil {
		t.Fatal(err)
	}
	refused := mutationsTotal.WithLabelValues(input.ActionLoadBalancerUpdate, lbplan.OpAddTarget, resultRefused)
	before, _ := testutil.GetCounterMetricValue(refused)
	emu.ResetRequests()
	plan := lbplan.Plan{Actual: &lbplan.Actual{ID: id, Name: "web"}, Mutations: []lbplan.Mutation{sendsDelete{}}}
	_, err = send(context.Background(), x, newRun(nil, plan), plan.Requests()[0], x.waitAlone)
	if !errors.Is(err, ErrRefused) {
		t.Errorf("send = %v, want a refusal", err)
	}
	if _, ok := emu.LoadBalancer(id); !ok {
		t.Error("the load balancer is gone")
	}
	if n := emu.MutatingRequests(); n != 0 {
		t.Errorf("%d mutating requests, want none", n)
	}
	if after, _ := testutil.GetCounterMetricValue(refused); after != before+1 {
		t.Errorf("refused counter %v -> %v, want one more", before, after)
	}
}

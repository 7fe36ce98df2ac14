package lbplan_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbgroup"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
)

// denyPorts is a DeniedSteps that denies every step adding a listener on one of ports (a create
// with one inline) and every step whose operation is one of ops; calls counts its rounds.
type denyPorts struct {
	ports []int
	ops   []string
	calls int
}

func (d *denyPorts) denied(p lbplan.Plan) []int {
	d.calls++
	var out []int
	for i, st := range p.Steps() {
		ms := append([]lbplan.Mutation{st.Mutation}, st.Inline...)
		if slices.ContainsFunc(ms, func(m lbplan.Mutation) bool {
			a, ok := m.(lbplan.AddService)
			return ok && slices.Contains(d.ports, a.Listener.ListenPort) || slices.Contains(d.ops, m.Operation())
		}) {
			out = append(out, i)
		}
	}
	return out
}

// TestPlanGroup: the group planner that the CCM, plan and the webhook share (issue 29 item 2).
// Members a (the leader, port 80), b (81) and c (82) of group web.
func TestPlanGroup(t *testing.T) {
	a, b, c := member("shop", "a", 1, grp, "web"), member("shop", "b", 2, grp, "web"), member("shop", "c", 3, grp, "web")
	leader := newService("a", withPorts(80))
	ls := mustDesired(t, newInput(newService("x", withPorts(80, 81, 82)))).Services // as NewDesired makes them
	all := []lbgroup.MemberListeners{{Member: "shop/a", Listeners: ls[0:1]}, {Member: "shop/b", Listeners: ls[1:2]}, {Member: "shop/c", Listeners: ls[2:3]}}
	existing := lbplan.NewActual(newLB(func(lb *hcloud.LoadBalancer) { lb.Labels = lbgroup.GroupDesiredLabels("web", "k8s", "shop") }))
	tests := []struct {
		name   string
		acting string
		lists  []lbgroup.MemberListeners
		actual *lbplan.Actual
		deny   *denyPorts // nil: no DeniedSteps
		nodes  []int64    // the leader's targets; nil: servers 1 and 2
		want   []string   // the plan's labels
		left   []string
		calls  int              // decision rounds: none once no step touches another member's listener
		ports  map[string][]int // input.group's ports by member
	}{
		{"without DeniedSteps every member is planned", "shop/a", all, nil, nil, nil,
			[]string{"create(web-lb)", "add_service(80)", "add_service(81)", "add_service(82)", "add_target(server:1)", "add_target(server:2)"}, nil, 0,
			map[string][]int{"a": {80}, "b": {81}, "c": {82}}},
		{"an allowed plan is decided once, with every member", "shop/a", all, nil, &denyPorts{}, nil,
			[]string{"create(web-lb)", "add_service(80)", "add_service(81)", "add_service(82)", "add_target(server:1)", "add_target(server:2)"}, nil, 1,
			map[string][]int{"a": {80}, "b": {81}, "c": {82}}},
		{"a create denied for another member's listener is made with the acting member's listeners only", "shop/a", all, nil, &denyPorts{ports: []int{82}}, nil,
			[]string{"create(web-lb)", "add_service(80)", "add_target(server:1)", "add_target(server:2)"}, []string{"shop/b", "shop/c"}, 1,
			map[string][]int{"a": {80}, "b": {}, "c": {}}},
		{"an update denied for another member's listener leaves that member out only", "shop/b", all, existing, &denyPorts{ports: []int{82}}, nil,
			[]string{"add_service(81)"}, []string{"shop/c"}, 1,
			map[string][]int{"a": {80}, "b": {81}, "c": {}}},
		{"the acting member's own denied listener gives the plan with every member", "shop/c", all, existing, &denyPorts{ports: []int{82}}, nil,
			[]string{"add_service(81)", "add_service(82)"}, nil, 1,
			map[string][]int{"a": {80}, "b": {81}, "c": {82}}},
		{"a denied step of no member (a target) gives the plan with every member", "shop/a", all, existing, &denyPorts{ports: []int{82}, ops: []string{lbplan.OpRemoveTarget}}, []int64{1},
			[]string{"remove_target(server:2)", "add_service(81)", "add_service(82)"}, nil, 1,
			map[string][]int{"a": {80}, "b": {81}, "c": {82}}},
		{"a plan that touches no other member's listener asks for no decision", "shop/a", all[:1], existing, &denyPorts{ports: []int{80}}, nil,
			nil, nil, 0, map[string][]int{"a": {80}, "b": {}, "c": {}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := newInput(leader)
			if tc.nodes != nil {
				in = newInput(leader, withNodes(tc.nodes...))
			}
			in.Name = "web-lb"
			var denied lbgroup.DeniedSteps
			if tc.deny != nil {
				denied = tc.deny.denied
			}
			out, err := lbgroup.PlanGroup(lbgroup.GroupInput{
				Group: "web", Home: "shop", Name: "web-lb", Labels: lbgroup.GroupDesiredLabels("web", "k8s", "shop"),
				Acting: tc.acting, Members: []*corev1.Service{a, b, c}, Leader: mustDesired(t, in), Lists: tc.lists,
				Type: lbgroup.TypeLimit{Name: "lb11", MaxServices: 5}, Actual: tc.actual,
			}, denied)
			if err != nil {
				t.Fatal(err)
			}
			if got := out.Plan.Labels(); !slices.Equal(got, tc.want) {
				t.Errorf("plan %v, want %v", got, tc.want)
			}
			if !slices.Equal(out.Left, tc.left) {
				t.Errorf("left out %v, want %v", out.Left, tc.left)
			}
			if tc.deny != nil && tc.deny.calls != tc.calls {
				t.Errorf("%d decision rounds, want %d", tc.deny.calls, tc.calls)
			}
			got := map[string][]int{}
			for _, m := range out.Plan.Group.Members {
				got[m.Name] = m.Ports
			}
			if !reflect.DeepEqual(got, tc.ports) {
				t.Errorf("input.group ports %v, want %v", got, tc.ports)
			}
		})
	}
}

// TestPlanGroup_Errors: Compute's bad input comes back (a create without a location).
func TestPlanGroup_Errors(t *testing.T) {
	in := newInput(newService("a", withPorts(80)))
	in.Defaults.Location = ""
	_, err := lbgroup.PlanGroup(lbgroup.GroupInput{Group: "web", Name: "web-lb", Labels: lbgroup.GroupDesiredLabels("web", "k8s", "shop"), Acting: "shop/a", Leader: mustDesired(t, in),
		Lists: []lbgroup.MemberListeners{{Member: "shop/a", Listeners: listeners(80)}}}, nil)
	if !annotation.IsUserError(err) {
		t.Errorf("err = %v, want the missing location", err)
	}
}

// TestSendOrder_IsRequestsOrder (issue 29 item 5): the steps in SendOrder are the requests in
// the order Requests sends them; on a create, the managed certificate comes first.
func TestSendOrder_IsRequestsOrder(t *testing.T) {
	https := newService("web", withPorts(443), withAnnotation(annotation.LBSvcProtocol, "https"), withAnnotation(annotation.LBSvcHTTPCertificateType, "managed"),
		withAnnotation(annotation.LBSvcHTTPManagedCertificateDomains, "a.example.com"), withAnnotation(annotation.LBSvcHTTPManagedCertificateName, "web-cert"))
	tests := []struct {
		name   string
		in     lbservice.DesiredInput
		actual *lbplan.Actual
		want   []string
	}{
		{"a create with a managed certificate sends the certificate first", newInput(https, withNodes(1)), nil,
			[]string{"create_managed_certificate(web-cert)", "create(web-lb)"}},
		{"an update with a managed certificate keeps the plan's order", newInput(https), lbplan.NewActual(newLB()),
			[]string{"create_managed_certificate(web-cert)", "delete_service(80)", "add_service(443)"}},
		{"a create without a certificate", newInput(newService("web", withPorts(80))), nil, []string{"create(web-lb)"}},
		{"nothing to do", newInput(newService("web", withPorts(80))), lbplan.NewActual(newLB()), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := lbplan.Compute(mustDesired(t, tc.in), tc.actual)
			if err != nil {
				t.Fatal(err)
			}
			steps := p.Steps()
			var got []string
			for _, i := range p.SendOrder() {
				got = append(got, steps[i].Label())
			}
			var sent []string
			for _, r := range p.Requests() {
				sent = append(sent, r.Mutation.Label())
			}
			if !slices.Equal(got, tc.want) || !slices.Equal(got, sent) {
				t.Errorf("SendOrder %v, want %v; Requests send %v", got, tc.want, sent)
			}
		})
	}
}

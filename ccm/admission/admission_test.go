package admission_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/admission"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbgroup"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/requeue"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

const ccmUser = "system:serviceaccount:kube-system:hcloud-cloud-controller-manager"

// planner plans like the CCM with no load balancer yet (a create) or, for PreviewDelete, an
// existing one; it records what it was asked.
type planner struct {
	calls []string
	err   error
	// existing is the load balancer Preview updates and PreviewDelete deletes (nil: none).
	existing *lbplan.Actual
	nodes    int
	// denied is what the DeniedSteps Preview got answered for its plan (a group planner asks).
	denied []int
}

func (p *planner) Preview(_ context.Context, _ string, svc *corev1.Service, nodes []*corev1.Node, denied lbgroup.DeniedSteps) (lbplan.Plan, error) {
	p.calls = append(p.calls, "preview "+svc.Name)
	p.nodes = len(nodes)
	if p.err != nil {
		return lbplan.Plan{}, p.err
	}
	d, err := lbservice.NewDesired(lbservice.DesiredInput{Service: svc, Name: "lb-" + svc.Name, Defaults: config.LoadBalancer{Location: "fsn1", Type: "lb11"}})
	if err != nil {
		return lbplan.Plan{}, err
	}
	plan, err := lbplan.Compute(d, p.existing)
	if err == nil && denied != nil {
		p.denied = denied(plan)
	}
	return plan, err
}

func (p *planner) PreviewDelete(_ context.Context, _ string, svc *corev1.Service) (lbplan.Plan, error) {
	p.calls = append(p.calls, "delete "+svc.Name)
	if p.existing == nil {
		return lbplan.Plan{}, nil
	}
	return lbplan.ComputeDelete(p.existing)
}

// decider denies the operations in deny, warns on those in warn; dryRun reports deny
// messages without blocking, as the engine in --policy-mode=dryrun.
type decider struct {
	deny, warn map[string]string
	dryRun     bool
	inputs     []input.Input
	failed     []error
}

func (d *decider) Decide(_ context.Context, in input.Input) policy.Decision {
	d.inputs = append(d.inputs, in)
	out := policy.Decision{ID: "id-" + in.Operation, Allowed: true, Revision: "r1"}
	if m, ok := d.warn[in.Operation]; ok {
		out.Warn = []policy.Message{{Msg: m, Code: "W1"}}
	}
	if m, ok := d.deny[in.Operation]; ok {
		out.Deny = []policy.Message{{Msg: m, Code: "D1"}}
		out.Allowed = d.dryRun
		out.DryRun = d.dryRun
	}
	return out
}

func (d *decider) DecideFailed(_ context.Context, in input.Input, err error) policy.Decision {
	d.inputs = append(d.inputs, in)
	d.failed = append(d.failed, err)
	return policy.Decision{ID: "id-failed", Allowed: false, Err: err}
}

type svcTweak func(*corev1.Service)

func service(name string, tweaks ...svcTweak) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID("uid-" + name), Annotations: map[string]string{}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080},
		}},
	}
	for _, t := range tweaks {
		t(s)
	}
	return s
}

func clusterIP(s *corev1.Service) {
	s.Spec.Type = corev1.ServiceTypeClusterIP
	s.Spec.Ports[0].NodePort = 0
}

func withAnnotation(k, v string) svcTweak { return func(s *corev1.Service) { s.Annotations[k] = v } }

func withClass(s *corev1.Service) { c := "example.com/other"; s.Spec.LoadBalancerClass = &c }

type reqTweak func(*admissionv1.AdmissionRequest)

func request(op admissionv1.Operation, svc, old *corev1.Service, tweaks ...reqTweak) *admissionv1.AdmissionRequest {
	r := &admissionv1.AdmissionRequest{
		UID:       "req-1",
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Service"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "services"},
		Operation: op,
		UserInfo:  authenticationv1.UserInfo{Username: "alice"},
		Object:    raw(svc),
		OldObject: raw(old),
	}
	for _, t := range tweaks {
		t(r)
	}
	return r
}

func raw(svc *corev1.Service) runtime.RawExtension {
	if svc == nil {
		return runtime.RawExtension{}
	}
	b, err := json.Marshal(svc)
	if err != nil {
		panic(err)
	}
	return runtime.RawExtension{Raw: b}
}

func TestReview(t *testing.T) {
	cases := []struct {
		name string
		req  *admissionv1.AdmissionRequest
		// decider and planner settings
		deny, warn  map[string]string
		dryRun      bool
		planErr     error
		nsErr       error
		hasLB       bool
		wantAllowed bool
		// wantCalls are the planner's calls; nil: none (not reviewed)
		wantCalls []string
		// wantMessage, wantWarnings: substrings of the denial message and of the joined warnings
		wantMessage  []string
		wantWarnings []string
		noWarnings   bool
	}{
		{
			name:        "a denied create is refused with the policy's message, code and decision ID",
			req:         request(admissionv1.Create, service("web"), nil),
			deny:        map[string]string{"create": "public load balancers need approval"},
			wantCalls:   []string{"preview web"},
			wantMessage: []string{admission.WarningPrefix, "policy denied 1 of 1 changes", "create(lb-web) (decision id-create): public load balancers need approval [D1]; no other step would run"},
			noWarnings:  true,
		},
		{
			name:        "a denied listener of an existing load balancer names the steps the CCM would still run (steps fail alone)",
			req:         request(admissionv1.Update, service("web", withAnnotation(string(annotation.LBAlgorithmType), "least_connections")), service("web")),
			deny:        map[string]string{"add_service": "port 80 needs approval"},
			hasLB:       true,
			wantCalls:   []string{"preview web"},
			wantMessage: []string{"policy denied 1 of 2 changes", "add_service(80) (decision id-add_service): port 80 needs approval [D1]; the other steps would still run: change_algorithm(least_connections)"},
			noWarnings:  true,
		},
		{
			name:         "a warn is an admission warning, the create is admitted",
			req:          request(admissionv1.Create, service("web"), nil),
			warn:         map[string]string{"create": "set a type explicitly"},
			wantAllowed:  true,
			wantCalls:    []string{"preview web"},
			wantWarnings: []string{admission.WarningPrefix + "create(lb-web): set a type explicitly [W1]"},
		},
		{
			name:         "dryrun: nothing is rejected, the warning says what would be denied",
			req:          request(admissionv1.Create, service("web"), nil),
			deny:         map[string]string{"create": "public load balancers need approval"},
			dryRun:       true,
			wantAllowed:  true,
			wantCalls:    []string{"preview web"},
			wantWarnings: []string{admission.WarningPrefix + "would be denied (dry run): create(lb-web) (decision id-create): public load balancers need approval [D1]"},
		},
		{
			name:         "a long message is cut at its end: the step and decision ID stay",
			req:          request(admissionv1.Create, service("web"), nil),
			deny:         map[string]string{"create": strings.Repeat("very long policy message ", 100)},
			dryRun:       true,
			wantAllowed:  true,
			wantCalls:    []string{"preview web"},
			wantWarnings: []string{"would be denied (dry run): create(lb-web) (decision id-create): very long", "bytes cut)"},
		},
		{
			name:        "a Service of another type is not reviewed",
			req:         request(admissionv1.Create, service("db", clusterIP), nil),
			deny:        map[string]string{"create": "x"},
			wantAllowed: true, noWarnings: true,
		},
		{
			name:        "a Service with a loadBalancerClass is not reviewed (the CCM leaves it alone)",
			req:         request(admissionv1.Create, service("web", withClass), nil),
			deny:        map[string]string{"create": "x"},
			wantAllowed: true, noWarnings: true,
		},
		{
			name:        "a change from LoadBalancer to ClusterIP plans the delete and is denied by a delete rule",
			req:         request(admissionv1.Update, service("web", clusterIP), service("web")),
			deny:        map[string]string{"delete": "load balancers in shop are kept"},
			hasLB:       true,
			wantCalls:   []string{"delete web"},
			wantMessage: []string{"load balancers in shop are kept [D1]", "(decision id-delete)"},
			noWarnings:  true,
		},
		{
			name:        "a change from LoadBalancer to ClusterIP without a load balancer has nothing to decide",
			req:         request(admissionv1.Update, service("web", clusterIP), service("web")),
			deny:        map[string]string{"delete": "kept"},
			wantAllowed: true, noWarnings: true,
			wantCalls: []string{"delete web"},
		},
		{
			name:        "a change from ClusterIP to LoadBalancer plans the create",
			req:         request(admissionv1.Update, service("web"), service("web", clusterIP)),
			deny:        map[string]string{"create": "no"},
			wantCalls:   []string{"preview web"},
			wantMessage: []string{"no [D1]"},
		},
		{
			name:        "a status update is not reviewed",
			req:         request(admissionv1.Update, service("web"), service("web"), func(r *admissionv1.AdmissionRequest) { r.SubResource = "status" }),
			deny:        map[string]string{"create": "x"},
			wantAllowed: true, noWarnings: true,
		},
		{
			name:        "the CCM's service account is not reviewed",
			req:         request(admissionv1.Update, service("web", withAnnotation("x", "1")), service("web"), func(r *admissionv1.AdmissionRequest) { r.UserInfo.Username = ccmUser }),
			deny:        map[string]string{"create": "x"},
			wantAllowed: true, noWarnings: true,
		},
		{
			name:        "an update that only sets the CCM's retry annotation is not reviewed, whoever sends it",
			req:         request(admissionv1.Update, service("web", withAnnotation(requeue.Annotation, "2026-01-01T00:00:00Z")), service("web")),
			deny:        map[string]string{"create": "x"},
			wantAllowed: true, noWarnings: true,
		},
		{
			name:        "an update that changes an annotation is reviewed",
			req:         request(admissionv1.Update, service("web", withAnnotation("team", "a")), service("web")),
			deny:        map[string]string{"create": "x"},
			wantCalls:   []string{"preview web"},
			wantMessage: []string{"x [D1]"},
		},
		{
			name:        "a DELETE is not reviewed",
			req:         request(admissionv1.Delete, nil, service("web")),
			deny:        map[string]string{"delete": "x"},
			wantAllowed: true, noWarnings: true,
		},
		{
			name:         "a bad annotation is admitted with a warning naming the annotation and what it accepts",
			req:          request(admissionv1.Create, service("web", withAnnotation(string(annotation.LBAlgorithmType), "fastest")), nil),
			deny:         map[string]string{"create": "x"},
			wantAllowed:  true,
			wantCalls:    []string{"preview web"},
			wantWarnings: []string{"the CCM will refuse this Service until the annotation is fixed", string(annotation.LBAlgorithmType), "fastest"},
		},
		{
			name:         "a failed read is admitted with a warning (the CCM-side gate stays the authority)",
			req:          request(admissionv1.Create, service("web"), nil),
			deny:         map[string]string{"create": "x"},
			planErr:      errors.New("list load balancers: connection refused"),
			wantAllowed:  true,
			wantCalls:    []string{"preview web"},
			wantWarnings: []string{"could not plan the load balancer, not reviewed", "connection refused"},
		},
		{
			name:        "unreadable namespace labels fail the decision as the gate does",
			req:         request(admissionv1.Create, service("web"), nil),
			nsErr:       errors.New(`namespace_labels: cannot read the labels of namespace "shop"`),
			wantCalls:   []string{"preview web"},
			wantMessage: []string{"(decision id-failed)"},
		},
		{
			name:        "a request for another resource is not reviewed",
			req:         request(admissionv1.Create, service("web"), nil, func(r *admissionv1.AdmissionRequest) { r.Resource.Resource = "endpoints" }),
			deny:        map[string]string{"create": "x"},
			wantAllowed: true, noWarnings: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &planner{err: tc.planErr}
			if tc.hasLB {
				p.existing = lbplan.NewActual(lbFixture())
			}
			d := &decider{deny: tc.deny, warn: tc.warn, dryRun: tc.dryRun}
			h, err := admission.New(admission.Config{
				Planner: p, ClusterName: "k",
				Gate: gate.Gate{Decider: d, Cluster: input.Cluster{Name: "k"}, NamespaceLabels: func(ns string) (map[string]string, error) {
					return map[string]string{"team": "shop"}, tc.nsErr
				}},
				Nodes: func() ([]*corev1.Node, error) {
					return []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}, nil
				},
				ExemptUsers: []string{ccmUser},
			})
			if err != nil {
				t.Fatal(err)
			}
			resp := h.Review(context.Background(), tc.req)
			if resp.UID != tc.req.UID {
				t.Errorf("UID = %q, want the request's %q", resp.UID, tc.req.UID)
			}
			if resp.Allowed != tc.wantAllowed {
				t.Errorf("Allowed = %v, want %v (result %+v, warnings %q)", resp.Allowed, tc.wantAllowed, resp.Result, resp.Warnings)
			}
			if strings.Join(p.calls, ",") != strings.Join(tc.wantCalls, ",") {
				t.Errorf("planner calls = %q, want %q", p.calls, tc.wantCalls)
			}
			if tc.wantCalls == nil && len(d.inputs) != 0 {
				t.Errorf("decided %d inputs for a request out of scope", len(d.inputs))
			}
			if !resp.Allowed {
				if resp.Result == nil || resp.Result.Code != 403 || resp.Result.Reason != metav1.StatusReasonForbidden {
					t.Fatalf("denial result = %+v, want 403 Forbidden", resp.Result)
				}
				for _, want := range tc.wantMessage {
					if !strings.Contains(resp.Result.Message, want) {
						t.Errorf("message %q lacks %q", resp.Result.Message, want)
					}
				}
			}
			for _, w := range resp.Warnings {
				if len(w) > 1024 {
					t.Errorf("a warning of %d bytes, want at most 1024", len(w))
				}
			}
			warnings := strings.Join(resp.Warnings, "\n")
			for _, want := range tc.wantWarnings {
				if !strings.Contains(warnings, want) {
					t.Errorf("warnings %q lack %q", resp.Warnings, want)
				}
			}
			if tc.noWarnings && len(resp.Warnings) != 0 {
				t.Errorf("warnings %q, want none", resp.Warnings)
			}
			for _, in := range d.inputs {
				if in.Service == nil || in.Service.Name != "web" || in.Service.NamespaceLabels["team"] != "shop" {
					t.Errorf("policy input service = %+v, want web with the namespace labels", in.Service)
				}
			}
		})
	}
}

// TestReview_InputsAreTheGates: the inputs decided are gate.Inputs of the plan, with the
// Service's view (ports, labels) and the nodes the service controller would pass.
func TestReview_InputsAreTheGates(t *testing.T) {
	p := &planner{}
	d := &decider{}
	gone := metav1.Now()
	h, err := admission.New(admission.Config{Planner: p, Gate: gate.Gate{Decider: d, Cluster: input.Cluster{Name: "k"}},
		Nodes: func() ([]*corev1.Node, error) {
			return []*corev1.Node{
				{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
				{ObjectMeta: metav1.ObjectMeta{Name: "n2", DeletionTimestamp: &gone}},
			}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	resp := h.Review(context.Background(), request(admissionv1.Create, service("web"), nil))
	if !resp.Allowed || len(d.inputs) == 0 {
		t.Fatalf("allowed %v, %d inputs", resp.Allowed, len(d.inputs))
	}
	in := d.inputs[0]
	if in.Action != "loadbalancer.create" || in.Operation != "create" || in.Cluster.Name != "k" || in.Service.UID != "uid-web" ||
		len(in.Service.Ports) != 1 || in.Service.Ports[0].NodePort != 30080 || in.Service.NamespaceLabels != nil {
		t.Errorf("input = %+v (service %+v)", in, in.Service)
	}
	if p.nodes != 1 {
		t.Errorf("planned with %d nodes, want 1 (the node being deleted is left out)", p.nodes)
	}
}

// TestReview_GroupPlannerDecidesAsTheGate: the DeniedSteps the webhook gives Preview (for the
// group planner, lbgroup.PlanGroup) decides each step as the review does, with the Service's
// namespace labels, so a group member is left out as the CCM's sync leaves it out.
func TestReview_GroupPlannerDecidesAsTheGate(t *testing.T) {
	p := &planner{}
	d := &decider{deny: map[string]string{"create": "no"}}
	h, err := admission.New(admission.Config{Planner: p,
		Gate: gate.Gate{Decider: d, NamespaceLabels: func(string) (map[string]string, error) { return map[string]string{"team": "a"}, nil }}})
	if err != nil {
		t.Fatal(err)
	}
	if resp := h.Review(context.Background(), request(admissionv1.Create, service("web"), nil)); resp.Allowed {
		t.Fatalf("allowed, want the create denied")
	}
	if len(p.denied) != 1 || p.denied[0] != 0 {
		t.Errorf("DeniedSteps answered %v, want [0] (the create)", p.denied)
	}
	for _, in := range d.inputs {
		if in.Service.NamespaceLabels["team"] != "a" {
			t.Errorf("input without the namespace labels: %+v", in.Service)
		}
	}
}

func TestNew_Errors(t *testing.T) {
	_, err := admission.New(admission.Config{})
	if err == nil || !strings.Contains(err.Error(), "Planner") || !strings.Contains(err.Error(), "Decider") {
		t.Errorf("New(empty) = %v, want errors naming Planner and Decider", err)
	}
}

func TestLoadBalancerNodes(t *testing.T) {
	gone := metav1.Now()
	node := func(name string, tweak func(*corev1.Node)) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if tweak != nil {
			tweak(n)
		}
		return n
	}
	cases := []struct {
		node *corev1.Node
		want bool
	}{
		{node("plain", nil), true},
		{node("deleting", func(n *corev1.Node) { n.DeletionTimestamp = &gone }), false},
		{node("excluded", func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "" }), false},
		{node("excluded-true", func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "true" }), false},
		{node("excluded-false", func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "false" }), true},
		{node("autoscaled-away", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: admission.ToBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule}}
		}), false},
		{node("not-ready", func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
		}), true}, // the stable node set ignores readiness
	}
	for _, tc := range cases {
		got := len(admission.LoadBalancerNodes([]*corev1.Node{tc.node})) == 1
		if got != tc.want {
			t.Errorf("node %s kept = %v, want %v", tc.node.Name, got, tc.want)
		}
	}
}

// lbFixture is an existing load balancer of the Service "web".
func lbFixture() *hcloud.LoadBalancer {
	return &hcloud.LoadBalancer{
		ID: 42, Name: "lb-web", Labels: map[string]string{lbplan.LabelServiceUID: "uid-web"},
		LoadBalancerType: &hcloud.LoadBalancerType{Name: "lb11", MaxTargets: 25},
		Location:         &hcloud.Location{Name: "fsn1", NetworkZone: hcloud.NetworkZoneEUCentral},
		Algorithm:        hcloud.LoadBalancerAlgorithm{Type: hcloud.LoadBalancerAlgorithmTypeRoundRobin},
	}
}

// TestReview_NotSynced: before the caches sync, nothing is decided (an empty namespace cache
// would fail every decision) and the request is admitted with a warning.
func TestReview_NotSynced(t *testing.T) {
	d := &decider{deny: map[string]string{"create": "x"}}
	h, err := admission.New(admission.Config{Planner: &planner{}, Gate: gate.Gate{Decider: d}, Synced: func() bool { return false }})
	if err != nil {
		t.Fatal(err)
	}
	resp := h.Review(context.Background(), request(admissionv1.Create, service("web"), nil))
	if !resp.Allowed || len(d.inputs) != 0 || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "not synced") {
		t.Errorf("allowed %v, %d inputs, warnings %q; want admitted undecided with a warning", resp.Allowed, len(d.inputs), resp.Warnings)
	}
}

// TestReview_loadBalancerClass: with Config.Serves (the CCM's loadbalancer.Serves) a Service of
// the class served is reviewed as a class-less one, with the class in the policy input; a
// Service of another class never is, nor, in class-only mode, a class-less one (issue 43).
func TestReview_loadBalancerClass(t *testing.T) {
	const ours = "example.com/hetzner"
	ourClass := func(s *corev1.Service) { c := ours; s.Spec.LoadBalancerClass = &c }
	serves := func(classOnly bool) func(*corev1.Service) bool {
		return func(s *corev1.Service) bool {
			if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
				return false
			}
			if s.Spec.LoadBalancerClass == nil {
				return !classOnly
			}
			return *s.Spec.LoadBalancerClass == ours
		}
	}
	cases := []struct {
		name      string
		svc       *corev1.Service
		classOnly bool
		wantClass string // "-": not reviewed
	}{
		{name: "our class is reviewed", svc: service("web", ourClass), wantClass: ours},
		{name: "our class, class-only, is reviewed", svc: service("web", ourClass), classOnly: true, wantClass: ours},
		{name: "another class is not", svc: service("web", withClass), wantClass: "-"},
		{name: "no class is", svc: service("web"), wantClass: ""},
		{name: "no class, class-only, is not", svc: service("web"), classOnly: true, wantClass: "-"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, d := &planner{}, &decider{deny: map[string]string{"create": "no"}}
			h, err := admission.New(admission.Config{
				Planner: p, Gate: gate.Gate{Decider: d, Cluster: input.Cluster{Name: "k"}}, ClusterName: "k",
				Nodes:  func() ([]*corev1.Node, error) { return nil, nil },
				Serves: serves(tc.classOnly),
			})
			if err != nil {
				t.Fatal(err)
			}
			resp := h.Review(context.Background(), request(admissionv1.Create, tc.svc, nil))
			if tc.wantClass == "-" {
				if !resp.Allowed || len(p.calls) != 0 || len(d.inputs) != 0 {
					t.Fatalf("reviewed (allowed %v, planner calls %q, %d decisions); want it out of scope", resp.Allowed, p.calls, len(d.inputs))
				}
				return
			}
			if resp.Allowed || len(d.inputs) == 0 {
				t.Fatalf("allowed %v with %d decisions; want the create denied", resp.Allowed, len(d.inputs))
			}
			if got := d.inputs[0].Service.LoadBalancerClass; got != tc.wantClass {
				t.Errorf("input.service.load_balancer_class = %q, want %q", got, tc.wantClass)
			}
		})
	}
}

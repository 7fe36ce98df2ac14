package executor_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// The gate with the real policy engine: what the CCM cannot read fails the decision, a warn
// rule never blocks, and a deny message can be rolled out on its own in dry run.

// engine returns a policy engine with the given failure mode and one revision holding the
// module rules (package ccm). The rules of these tests fire only for cluster "prod" (the
// executor's cluster in newEnv), so the shipped sample inputs that vet a revision pass them.
func engine(t *testing.T, failure policy.FailureMode, rules string) *policy.Engine {
	t.Helper()
	e := policy.NewEngine(policy.Options{FailureMode: failure})
	if _, err := e.Load(context.Background(), map[string][]byte{"gate.rego": []byte("package ccm\n\n" + rules)}, policy.Source{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	return e
}

// namespaceLister is a NamespaceLister whose Get returns ns or err.
type namespaceLister struct {
	ns  *corev1.Namespace
	err error
}

var _ corelisters.NamespaceLister = namespaceLister{}

func (l namespaceLister) List(labels.Selector) ([]*corev1.Namespace, error) {
	if l.err != nil {
		return nil, l.err
	}
	return []*corev1.Namespace{l.ns}, nil
}

func (l namespaceLister) Get(name string) (*corev1.Namespace, error) {
	if l.err != nil {
		return nil, l.err
	}
	if l.ns == nil || l.ns.Name != name {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
	}
	return l.ns, nil
}

// TestRun_NamespaceLabelsUnreadable: a rule keyed on a namespace label must not silently pass
// when the CCM cannot read the labels; the decision is an evaluation error under the failure
// mode instead of an input with namespace_labels null.
func TestRun_NamespaceLabelsUnreadable(t *testing.T) {
	const frozen = `deny contains "namespace is frozen" if {
	input.cluster.name == "prod"
	input.service.namespace_labels.frozen == "true"
}
`
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "shop", errors.New(`User "ccm" cannot get resource "namespaces"`))
	shop := func(l map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: l}}
	}
	tests := []struct {
		name        string
		failure     policy.FailureMode
		lister      namespaceLister
		wantDenied  bool
		wantEvent   string // prefix of an event that must be recorded
		wantMessage string // in that event
	}{
		{
			name:    "A labelled namespace is denied by the rule",
			failure: policy.FailClosed, lister: namespaceLister{ns: shop(map[string]string{"frozen": "true"})},
			wantDenied: true, wantEvent: "Warning PolicyDenied", wantMessage: "namespace is frozen",
		},
		{
			name:    "An unlabelled namespace is allowed",
			failure: policy.FailClosed, lister: namespaceLister{ns: shop(nil)},
			wantEvent: "Normal LoadBalancerCreated",
		},
		{
			name:    "A forbidden namespace read denies under closed",
			failure: policy.FailClosed, lister: namespaceLister{err: forbidden},
			wantDenied: true, wantEvent: "Warning PolicyDenied", wantMessage: `namespace_labels: cannot read the labels of namespace "shop"`,
		},
		{
			name:    "A namespace missing from the cache denies under closed",
			failure: policy.FailClosed, lister: namespaceLister{ns: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}},
			wantDenied: true, wantEvent: "Warning PolicyDenied", wantMessage: `"shop" not found`,
		},
		{
			name:    "A forbidden namespace read is allowed with a warning under open",
			failure: policy.FailOpen, lister: namespaceLister{err: forbidden},
			wantEvent: "Warning PolicyWarning", wantMessage: "allowed by the failure mode",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t, allow, withNamespaces(tc.lister))
			e := engine(t, tc.failure, frozen)
			x := newExecutor(t, executor.Options{Conn: ev.conn, Decider: e, Recorder: ev.recorder, Cluster: input.Cluster{Name: "prod"}, Namespaces: tc.lister})
			svc := newService()
			_, err := x.Run(context.Background(), svc, ev.plan(t, svc, nil))
			if denied := errors.Is(err, policy.ErrDenied); denied != tc.wantDenied {
				t.Fatalf("err = %v, want denied %v", err, tc.wantDenied)
			}
			if tc.wantDenied && ev.emu.MutatingRequests() != 0 {
				t.Errorf("%d mutating requests after a denial", ev.emu.MutatingRequests())
			}
			found := false
			events := ev.events()
			for _, e := range events {
				if strings.HasPrefix(e, tc.wantEvent) && strings.Contains(e, tc.wantMessage) {
					found = true
				}
			}
			if !found {
				t.Errorf("events = %q, want %q containing %q", events, tc.wantEvent, tc.wantMessage)
			}
		})
	}
}

// TestRun_RuleErrors: a warn rule that fails (a division by zero) gives a warning and does not
// block; a deny rule that fails blocks (closed).
func TestRun_RuleErrors(t *testing.T) {
	const divide = `10 / (count(input.cluster.name) - 4) > 1`
	tests := []struct {
		name       string
		rules      string
		wantDenied bool
		wantEvent  string
	}{
		{
			name:      "A warn rule that divides by zero does not block",
			rules:     "warn contains \"w\" if {\n\tinput.cluster.name == \"prod\"\n\t" + divide + "\n}\n",
			wantEvent: "Warning PolicyWarning",
		},
		{
			name:       "A deny rule that divides by zero blocks",
			rules:      "deny contains \"d\" if {\n\tinput.cluster.name == \"prod\"\n\t" + divide + "\n}\n",
			wantDenied: true,
			wantEvent:  "Warning PolicyDenied",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t, allow)
			x := newExecutor(t, executor.Options{Conn: ev.conn, Decider: engine(t, policy.FailClosed, tc.rules), Recorder: ev.recorder, Cluster: input.Cluster{Name: "prod"}})
			svc := newService()
			_, err := x.Run(context.Background(), svc, ev.plan(t, svc, nil))
			if denied := errors.Is(err, policy.ErrDenied); denied != tc.wantDenied {
				t.Fatalf("err = %v, want denied %v", err, tc.wantDenied)
			}
			if mutating := ev.emu.MutatingRequests(); (mutating == 0) != tc.wantDenied {
				t.Errorf("%d mutating requests, want them only when allowed", mutating)
			}
			events := ev.events()
			if count(events, tc.wantEvent) != 1 || !strings.Contains(strings.Join(events, "\n"), "divide by zero") {
				t.Errorf("events = %q, want one %q naming the division by zero", events, tc.wantEvent)
			}
		})
	}
}

// TestRun_PerRuleDryRun: a deny message with "enforcement": "dryrun" is reported as
// PolicyDryRunDenied and does not block; other deny messages still do.
func TestRun_PerRuleDryRun(t *testing.T) {
	const dryRunTargets = `deny contains {"msg": "new rule: no targets", "enforcement": "dryrun"} if {
	input.cluster.name == "prod"
	some t in input.load_balancer.targets
	t.type == "server"
}
`
	const noCreate = `deny contains "no creates" if {
	input.cluster.name == "prod"
	input.operation == "create"
}
`
	tests := []struct {
		name       string
		rules      string
		wantDenied bool
		wantEvents map[string]string // event prefix -> text it contains
	}{
		{
			name:  "A dry-run deny alone does not block",
			rules: dryRunTargets,
			wantEvents: map[string]string{
				"Warning PolicyDryRunDenied": "would be denied (dry run): new rule: no targets: for create(",
				"Normal LoadBalancerCreated": "applied: create(",
			},
		},
		{
			name:       "An enforced deny blocks next to a dry-run one, and both are reported",
			rules:      dryRunTargets + noCreate,
			wantDenied: true,
			wantEvents: map[string]string{
				"Warning PolicyDryRunDenied": "new rule: no targets",
				"Warning PolicyDenied":       "nothing changed: no creates: for create(",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t, allow)
			x := newExecutor(t, executor.Options{Conn: ev.conn, Decider: engine(t, policy.FailClosed, tc.rules), Recorder: ev.recorder, Cluster: input.Cluster{Name: "prod"}})
			svc := newService()
			_, err := x.Run(context.Background(), svc, ev.plan(t, svc, nil))
			if denied := errors.Is(err, policy.ErrDenied); denied != tc.wantDenied {
				t.Fatalf("err = %v, want denied %v", err, tc.wantDenied)
			}
			if tc.wantDenied && strings.Contains(err.Error(), "new rule") {
				t.Errorf("err = %v names the dry-run message", err)
			}
			events := ev.events()
			for prefix, text := range tc.wantEvents {
				if count(events, prefix) != 1 || !strings.Contains(strings.Join(events, "\n"), text) {
					t.Errorf("events = %q, want one %q containing %q", events, prefix, text)
				}
			}
			if !tc.wantDenied && count(events, "Warning PolicyDenied") != 0 {
				t.Errorf("events = %q, want no PolicyDenied", events)
			}
		})
	}
}

// TestRun_DenyEventNamesOnlyTheDeniedStep is the scenario of a policy author: the example
// policies allow listeners on 80 and 443 only, and an update adds 22 and 443. Only
// add_service(22) is denied, and the event names it alone, not "2 × add_service"; the other
// steps run (steps fail alone), and the event names them too.
func TestRun_DenyEventNamesOnlyTheDeniedStep(t *testing.T) {
	ev := newEnv(t, allow)
	files, err := policy.ReadDir("../../examples/policies")
	if err != nil {
		t.Fatal(err)
	}
	e := policy.NewEngine(policy.Options{})
	if _, err := e.Load(context.Background(), files, policy.Source{Name: "examples"}); err != nil {
		t.Fatal(err)
	}
	x := newExecutor(t, executor.Options{Conn: ev.conn, Decider: e, Recorder: ev.recorder, Cluster: input.Cluster{Name: "prod"}})
	lb := ev.bareLB(t)
	svc := newService()
	svc.Namespace = "default" // public load balancers are allowed there
	svc.Spec.Ports = []corev1.ServicePort{
		{Name: "ssh", Protocol: corev1.ProtocolTCP, Port: 22, NodePort: 30022},
		{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, NodePort: 30443},
	}
	plan := ev.plan(t, svc, lb)
	ev.emu.ResetRequests()
	_, err = x.Run(context.Background(), svc, plan)
	if !errors.Is(err, policy.ErrDenied) {
		t.Fatalf("err = %v, want denied; plan %v", err, plan.Labels())
	}
	const want = "listen port 22 is not allowed (allowed: [80, 443]): for add_service(22) (decision ID)"
	events := ev.events()
	for i := range events {
		events[i] = withoutDecisionIDs(events[i])
	}
	const applied = "applied: add_service(443), add_target(server:1), add_target(server:2)"
	if count(events, "Warning PolicyDenied "+applied+"; denied: "+want) != 1 || count(events, "Normal LoadBalancerUpdated "+applied) != 1 || len(events) != 2 {
		t.Errorf("events = %q, want exactly one PolicyDenied ending %q (plan %v)", events, want, plan.Labels())
	}
	if !strings.HasSuffix(withoutDecisionIDs(err.Error()), want) || !strings.HasPrefix(err.Error(), "1 of 4 changes denied, "+applied) {
		t.Errorf("err = %v, want 1 denied change, naming only add_service(22)", err)
	}
	if n := ev.emu.MutatingRequests(); n != 3 {
		t.Errorf("%d mutating requests after a denial of 1 of 4 steps, want the 3 others", n)
	}
}

// TestDeniedSteps: DeniedSteps decides as the gate of Run does and names the denied steps by
// their index in plan.Steps(), with no event and no request; an allowed plan gives none.
func TestDeniedSteps(t *testing.T) {
	files, err := policy.ReadDir("../../examples/policies")
	if err != nil {
		t.Fatal(err)
	}
	e := policy.NewEngine(policy.Options{})
	if _, err := e.Load(context.Background(), files, policy.Source{Name: "examples"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		ports []int32
		want  []string // labels of the denied steps
	}{
		{"port 22 among allowed ones", []int32{22, 443}, []string{"add_service(22)"}},
		{"allowed ports only", []int32{80, 443}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := newEnv(t, allow)
			x := newExecutor(t, executor.Options{Conn: ev.conn, Decider: e, Recorder: ev.recorder, Cluster: input.Cluster{Name: "prod"}})
			lb := ev.bareLB(t)
			svc := newService()
			svc.Namespace = "default" // public load balancers are allowed there
			svc.Spec.Ports = nil
			for _, p := range tt.ports {
				svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: fmt.Sprint("p", p), Protocol: corev1.ProtocolTCP, Port: p, NodePort: 30000 + p})
			}
			plan := ev.plan(t, svc, lb)
			ev.emu.ResetRequests()
			steps := plan.Steps()
			var got []string
			for _, i := range x.Gate().DeniedSteps(context.Background(), plan, svc) {
				got = append(got, steps[i].Label())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("DeniedSteps() = %v, want %v (plan %v)", got, tt.want, plan.Labels())
			}
			if ev := ev.events(); len(ev) != 0 {
				t.Errorf("events %v, want none", ev)
			}
			if n := len(ev.emu.Requests()); n != 0 {
				t.Errorf("%d requests, want none", n)
			}
		})
	}
}

// TestGate_DryRunNeverBlocks: in dry-run mode a deny rule that fails at run time blocks
// nothing, whatever the failure mode, on both paths of a load balancer: Run (a create) and
// RunDetached (UpdateLoadBalancer's add_target, how a new node reaches every load balancer).
// A failure the failure mode would have blocked is reported as PolicyDryRunDenied naming the
// failure; one it allows is a PolicyWarning, as in enforce mode. Issue 34: in dry run with
// the failure mode closed, a new node was missing from every load balancer.
func TestGate_DryRunNeverBlocks(t *testing.T) {
	const failing = "deny contains \"d\" if {\n\tinput.cluster.name == \"prod\"\n\t10 / (count(input.cluster.name) - 4) > 1\n}\n"
	tests := []struct {
		name      string
		failure   policy.FailureMode
		detached  bool
		wantEvent string // "Warning <reason>: <text>", the only Warning event
	}{
		{name: "failure mode closed, create", failure: policy.FailClosed,
			wantEvent: "Warning PolicyDryRunDenied would be denied (dry run): policy evaluation failed: "},
		{name: "failure mode closed, detached add_target", failure: policy.FailClosed, detached: true,
			wantEvent: "Warning PolicyDryRunDenied would be denied (dry run): policy evaluation failed: "},
		{name: "failure mode open, create", failure: policy.FailOpen,
			wantEvent: "Warning PolicyWarning policy evaluation failed, allowed by the failure mode: "},
		{name: "failure mode open, detached add_target", failure: policy.FailOpen, detached: true,
			wantEvent: "Warning PolicyWarning policy evaluation failed, allowed by the failure mode: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t, allow)
			e := policy.NewEngine(policy.Options{Mode: policy.ModeDryRun, FailureMode: tc.failure})
			if _, err := e.Load(context.Background(), map[string][]byte{"gate.rego": []byte("package ccm\n\n" + failing)}, policy.Source{Name: "test"}); err != nil {
				t.Fatal(err)
			}
			x := newExecutor(t, executor.Options{Conn: ev.conn, Decider: e, Recorder: ev.recorder, Cluster: input.Cluster{Name: "prod"}})
			var err error
			var lbID int64
			if tc.detached {
				svc, lb := ev.serviceLB(t, 1)
				lbID = lb.ID
				plan := lbplan.Plan{Actual: lbplan.NewActual(lb), Mutations: []lbplan.Mutation{lbplan.AddTarget{Target: lbplan.Target{ServerID: ev.servers[0], Node: "node-1"}}}}
				if !executor.Detachable(plan) {
					t.Fatal("the add_target plan is not detachable")
				}
				_, err = x.RunDetached(context.Background(), svc, plan, nil)
				if serr := x.Settle(context.Background(), svc.UID); serr != nil {
					t.Fatal(serr)
				}
			} else {
				svc := newService()
				_, err = x.Run(context.Background(), svc, ev.plan(t, svc, nil))
			}
			if err != nil {
				t.Fatalf("err = %v, want the run to go through: dry run never blocks", err)
			}
			if tc.detached {
				if got := ev.targetIDs(t, lbID); len(got) != 1 || got[0] != ev.servers[0] {
					t.Errorf("targets %v, want the new node's server %d", got, ev.servers[0])
				}
			} else if lbs := ev.emu.LoadBalancers(); len(lbs) != 1 {
				t.Errorf("%d load balancers, want the created one", len(lbs))
			}
			var warnings []string
			for _, e := range ev.events() {
				if strings.HasPrefix(e, "Warning ") {
					warnings = append(warnings, e)
				}
			}
			if len(warnings) != 1 || !strings.HasPrefix(warnings[0], tc.wantEvent) || !strings.Contains(warnings[0], "divide by zero") {
				t.Errorf("Warning events %q, want one starting %q naming the division by zero", warnings, tc.wantEvent)
			}
		})
	}
}

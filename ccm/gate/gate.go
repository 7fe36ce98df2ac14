// Package gate is the policy gate's pure part: the policy input of every step of a plan
// (Inputs, RouteInputs, PolicyService), the verdict on a plan (Gate.Decide: steps fail alone),
// the steps a decider denies (Gate.DeniedSteps), the digest of what was decided (Gate.Digest)
// and the messages a denial or warning shows (DenyMessages, DecisionWarnings, DeniedError).
//
// The CCM's executor, `hcloud-policy-ccm plan` (ccm/ciplan), the admission webhook
// (ccm/admission) and the policy audit (ccm/audit) all decide through a Gate, so they build the
// same inputs and reach one verdict for one state (enforced by the code path: none of them
// builds an input itself; TestPlanMatchesCCM in ccm/ciplan and the differential tests compare
// the verdicts). The package sends nothing, records no event and counts no mutation: it imports
// no Hetzner client, so the compiler keeps it from writing (TestGateIsPure in ccm/closed_test.go
// fails if it ever imports one).
package gate

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// Gate decides the plans of one cluster with one decider. The zero value is not usable: set
// Decider. A Gate is a value; copying it is cheap and safe for concurrent use as far as its
// Decider and NamespaceLabels are.
type Gate struct {
	// Decider decides every step. policy.AllowAll{} allows every step.
	Decider policy.Decider
	// Cluster is the cluster as policies see it (input.cluster).
	Cluster input.Cluster
	// NamespaceLabels returns the labels of a namespace for input.service.namespace_labels; nil
	// leaves that field null. An error makes every decision about a Service of that namespace
	// an evaluation failure (policy.InputFailer), never an input with the field null.
	NamespaceLabels func(namespace string) (map[string]string, error)
	// Audit marks every input as an audit's (input.audit true): the audit judges what exists.
	Audit bool
}

// StepInput is one mutation of a plan as the gate decides it: its label (Step.Label) and its
// policy input.
type StepInput struct {
	Label string
	Input input.Input
}

// StepDecision is one step's input and its decision.
type StepDecision struct {
	StepInput
	Decision policy.Decision
}

// Service returns the policy view of svc (PolicyService) with its namespace's labels. The error
// says that they could not be read: decisions are then evaluation failures (decide).
func (g Gate) Service(svc *corev1.Service) (*input.Service, error) {
	if svc == nil {
		return nil, nil
	}
	var labels map[string]string
	var err error
	if g.NamespaceLabels != nil {
		labels, err = g.NamespaceLabels(svc.Namespace)
	}
	return PolicyService(svc, labels), err
}

// Inputs returns the policy input of every step of plan for svc (pure Inputs with the Service
// view of Service), with input.audit set for an audit's Gate. The error is Service's.
func (g Gate) Inputs(plan lbplan.Plan, svc *corev1.Service) ([]StepInput, error) {
	service, err := g.Service(svc)
	steps := Inputs(plan, g.Cluster, service)
	if g.Audit {
		for i := range steps {
			steps[i].Input.Audit = true
		}
	}
	return steps, err
}

// Decisions decides every step of plan for svc once, on the inputs of the whole plan (Inputs),
// in plan.Steps order. It is what the audit shows and what DeniedSteps filters; the verdict of
// a plan that runs is Decide's.
func (g Gate) Decisions(ctx context.Context, plan lbplan.Plan, svc *corev1.Service) []StepDecision {
	steps, inputErr := g.Inputs(plan, svc)
	out := make([]StepDecision, len(steps))
	for i, st := range steps {
		out[i] = StepDecision{StepInput: st, Decision: g.decide(ctx, st.Input, inputErr)}
	}
	return out
}

// DeniedSteps returns the indices, in plan.Steps order, of the steps of plan that the decider
// denies for svc (Decisions); nil when it allows all. The group planner (lbgroup.PlanGroup) leaves
// out the members it names. It decides each step once, on the whole plan's inputs, and records
// nothing; the decider counts and logs its decisions like any others.
func (g Gate) DeniedSteps(ctx context.Context, plan lbplan.Plan, svc *corev1.Service) []int {
	var out []int
	for i, d := range g.Decisions(ctx, plan, svc) {
		if !d.Decision.Allowed {
			out = append(out, i)
		}
	}
	return out
}

// decide decides in; with inputErr set (the Service view is incomplete) the decision is an
// evaluation failure when the decider can fail an input (policy.InputFailer). A decider that
// cannot (policy.AllowAll: no policy) decides without the field: no rule can depend on it.
func (g Gate) decide(ctx context.Context, in input.Input, inputErr error) policy.Decision {
	if inputErr != nil {
		if f, ok := g.Decider.(policy.InputFailer); ok {
			return f.DecideFailed(ctx, in, inputErr)
		}
	}
	return g.Decider.Decide(ctx, in)
}

// DecideInput decides one input as the gate decides a step: see decide. It is for inputs that are
// no step of a load balancer plan (a route's, RouteInputs).
func (g Gate) DecideInput(ctx context.Context, in input.Input) policy.Decision {
	if g.Audit {
		in.Audit = true
	}
	return g.decide(ctx, in, nil)
}

// Revision returns the policy revision in force and whether the decider names one:
// policy.Engine names its revision; policy.AllowAll, an engine before its first revision and
// deciders without a Revision method do not.
func (g Gate) Revision() (string, bool) {
	r, ok := g.Decider.(interface{ Revision() string })
	if !ok {
		return "", false
	}
	rev := r.Revision()
	return rev, rev != ""
}

// ReadsInventory reports whether decisions read the inventory: a policy revision is in force
// (Revision) and, when the decider tells (policy.Engine.ReadsInventory), it names
// input.inventory or input.cost. Without a policy the CCM behaves as the official one, which has
// no inventory, and a policy that does not read it costs no request for it. Callers price a plan
// (lbplan.Plan.Pricing) only when it is true.
func (g Gate) ReadsInventory() bool {
	if _, named := g.Revision(); !named {
		return false
	}
	r, ok := g.Decider.(interface{ ReadsInventory() bool })
	return !ok || r.ReadsInventory()
}

// ErrNamespacesForbidden is what a namespace lister returns when the CCM may not list and watch
// namespaces (checked once at start, where the log line and the event NamespacesForbidden name
// the missing permission): every decision about a Service is then an evaluation error, reported
// in dry run and handled by --policy-failure-mode in enforce.
var ErrNamespacesForbidden = errors.New("the CCM may not list and watch namespaces (named once at start: log line and event NamespacesForbidden)")

// ListerLabels is a Gate.NamespaceLabels reading lister: a copy of the labels of a namespace,
// from the informer's cache, so no request leaves the process.
//
// # Errors
//
// An error names the namespace and the fix when the labels cannot be read: the namespace is
// not in the cache (not synced yet, or the CCM may not list and watch namespaces).
func ListerLabels(lister corelisters.NamespaceLister) func(namespace string) (map[string]string, error) {
	return func(ns string) (map[string]string, error) {
		n, err := lister.Get(ns)
		if errors.Is(err, ErrNamespacesForbidden) { // the fix was named once at start
			return nil, fmt.Errorf("namespace_labels: cannot read the labels of namespace %q: %w", ns, err)
		}
		if err != nil {
			return nil, fmt.Errorf("namespace_labels: cannot read the labels of namespace %q (the CCM needs get, list and watch on namespaces; see the ClusterRole in deploy/chart/templates/rbac.yaml): %w", ns, err)
		}
		return copyMap(n.Labels), nil
	}
}

// Package executor is the policy gate and the only code of the CCM that writes to the Hetzner
// Cloud API. Run decides every request of a load balancer plan before it sends the first one;
// RunRoutes (and AddRoute/DeleteRoute) gate route changes the same way. It writes through the
// client of its internal package writeclient, which the compiler keeps every package outside
// ccm/executor from importing; the others read through the wrappers of ccm/hcloudclient,
// which have no write method and whose client refuses writes at run time.
// TestOnlyTheExecutorCanWriteToHetzner (ccm/invariant_test.go) fails on the other ways to write
// that it knows (docs/rationale.md lists them); reflection and package unsafe are outside what
// these guards see.
//
// It sends only what the policy decided (vet.go): a plan with a mutation whose exact type is
// not a registered kind (lbplan.Kinds, routeplan.Kinds: copies of unexported tables that no
// other package can extend, ccm/closed_test.go) is refused before it is decided, and a
// request whose endpoint (apireq.Of, from its method and path) is not its mutation's action and
// operation, or that names another load balancer or network than the one decided on, is
// refused before it is sent (ErrRefused, counted as hcloud_ccm_mutations_total{result="refused"}).
//
// It is a small interpreter of data: every mutation (ccm/lbplan, ccm/routeplan) says how it is
// sent, as an apireq.Request (method, path, a body of hcloud-go's schema types, whether to
// await the action, declared outcomes of error codes). Run and RunRoutes go gate -> send ->
// wait -> advance: send (send.go), the one interpreter of every resource, builds the request
// from the run's state, vets it, sends it with the client's NewRequest and Do, turns a
// declared outcome into its result and events, awaits the action and moves the state on (a
// load balancer's: the mutation's Apply, or the create's answer; routes carry none).
//
// Start with New, then Run (load balancers), RunDetached (UpdateLoadBalancer's target changes:
// returns once the API accepted the first request, the rest ends in the background; detach.go)
// and RunRoutes (routes).
package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor/internal/writeclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/truncate"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// Event reasons. They MUST not change: operators alert on them.
const (
	ReasonPolicyDenied        = "PolicyDenied"
	ReasonPolicyWarning       = "PolicyWarning"
	ReasonPolicyDryRunDenied  = "PolicyDryRunDenied"
	ReasonMaxTargetsReached   = lbplan.ReasonMaxTargetsReached
	ReasonDeleteProtected     = lbplan.ReasonDeleteProtected
	ReasonLoadBalancerUpdated = "LoadBalancerUpdated"
	ReasonLoadBalancerCreated = "LoadBalancerCreated"
	ReasonLoadBalancerDeleted = "LoadBalancerDeleted"
)

// RetryAfter is how long the service controller waits before retrying a load balancer that was
// locked by another action or changed during the request.
const RetryAfter = 5 * time.Second

// Executor decides and runs mutations. It is safe for concurrent use.
type Executor struct {
	client     *hcloud.Client
	decider    policy.Decider
	recorder   record.EventRecorder
	cluster    policy.Cluster
	namespaces corelisters.NamespaceLister
	actions    actionWaiter // batched action polls of route writes (RunRoutes) and detached runs (detach.go)
	detached   detached     // the detached runs in flight (detach.go)
	// inventory prices the plans the gate decides (inventory.go); nil until SetInventory.
	inventory atomic.Pointer[InventorySource]
}

// Options configure [New]. Conn and Decider are required.
type Options struct {
	// Conn is the connection to the API; New builds the one writing client from it
	// (internal/writeclient), which shares its transport and so the API budget with the readers.
	Conn *hcloudclient.Conn
	// Decider decides every mutation. Pass policy.AllowAll{} to allow every mutation: the CCM
	// does so only when no policy source is configured (ccm/sources.go, startPolicy).
	Decider policy.Decider
	// Recorder receives the events; nil drops them.
	Recorder record.EventRecorder
	// Cluster is the cluster as policies see it.
	Cluster policy.Cluster
	// Namespaces, if not nil, makes policy inputs carry the labels of the Service's namespace.
	Namespaces corelisters.NamespaceLister
	// ActionPollInterval is the first wait before the actions of route writes and of detached
	// runs (RunDetached) are polled; each
	// later round waits twice as long, up to 2s (or the interval, if larger). 0 means
	// DefaultActionPollInterval. Pass HCLOUD_POLL_INTERVAL.
	ActionPollInterval time.Duration
}

// New returns an Executor.
//
// # Errors
//
// A nil Conn or Decider is an error: allowing every mutation is spelled out (policy.AllowAll),
// never a default.
func New(o Options) (*Executor, error) {
	if o.Conn == nil {
		return nil, errors.New("executor.New: Options.Conn is required: pass the connection of hcloudclient.New")
	}
	if o.Decider == nil {
		return nil, errors.New("executor.New: Options.Decider is required: pass the policy engine, or policy.AllowAll{} to allow every mutation")
	}
	if o.Recorder == nil {
		o.Recorder = &record.FakeRecorder{}
	}
	registerMetrics()
	return &Executor{
		client: writeclient.New(o.Conn), decider: o.Decider, recorder: o.Recorder, cluster: o.Cluster,
		namespaces: o.Namespaces, actions: actionWaiter{interval: o.ActionPollInterval},
	}, nil
}

// Run decides every request of plan for svc (one decision per request, plan.Steps: a create's
// decision shows the listeners and targets that ride along in it; Decide) and sends the
// requests of the steps that run (plan.Requests of Verdict.Run), waiting for each action. It
// returns the load balancer to build the Service status from (lbplan.Status): plan.Actual for
// an empty plan; the create's answer after a create, then every later mutation's Apply;
// re-read only when the API picked a private IP (an attachment without a fixed one); nil after
// a delete.
//
// svc is read, never modified. It may be nil for a run on behalf of no Service (the delete of
// a load balancer group's load balancer without members, loadbalancer.SweepOrphanGroups): the
// decisions' input.service is then null, and the events, with no object to sit on, are logged.
//
// Only what the policy decided is sent. A plan with a mutation whose exact type is not a
// registered kind (lbplan.Kinds) is refused before anything is decided, and a request whose
// method and path (apireq.Of) are not its mutation's action and operation, or that names
// another load balancer than the one decided on, is refused before it is sent; both return an
// error wrapping ErrRefused.
//
// # Errors
//
// Steps fail alone (Decide): a denied step of a plan on an existing load balancer skips
// itself and the steps that need it, and the other steps run. Run then returns the load
// balancer those steps left together with a *DeniedError (it wraps policy.ErrDenied) naming
// what was applied, what was denied and what was skipped with it, and puts the same on svc as
// one Warning event PolicyDenied. When nothing can run (a denied create or delete, or every
// step denied or skipped), it sends nothing and returns nil with the *DeniedError ("nothing
// changed"). A failed request stops the run; its error is prefixed with the
// label of its mutation. A load balancer locked by a running action or changed during the
// request gives a wrapped *api.RetryError (retried after RetryAfter). When the API rejects what
// rides along with a create (a target or listener it refuses, resource_limit_exceeded), the
// create is sent alone and the rest one request each, as if nothing rode along, so a target
// beyond the limit is reported MaxTargetsReached and other errors name their step. A detached
// run of svc still in flight (RunDetached) is waited for first (Settle; its ctx error if ctx
// ends first).
func (x *Executor) Run(ctx context.Context, svc *corev1.Service, plan lbplan.Plan) (*lbplan.Actual, error) {
	if plan.Empty() {
		return plan.Actual, nil
	}
	if err := vetKinds(plan.Mutations); err != nil {
		return nil, err
	}
	if svc != nil {
		if err := x.Settle(ctx, svc.UID); err != nil {
			return nil, err
		}
	}
	run, denied := x.gate(ctx, svc, plan)
	return x.runGated(ctx, svc, run, denied)
}

// runGated sends the requests of run, the part of a plan the gate lets run, and reports a
// denial of the rest (denied, nil when nothing was denied); see Run.
func (x *Executor) runGated(ctx context.Context, svc *corev1.Service, plan lbplan.Plan, denied *DeniedError) (*lbplan.Actual, error) {
	if denied != nil && plan.Empty() {
		x.event(svc, corev1.EventTypeWarning, ReasonPolicyDenied, denied.summary())
		return nil, denied
	}
	r := newRun(svc, plan)
	reqs := plan.Requests()
	var err error
	for i := 0; i < len(reqs) && err == nil; i++ {
		var split bool
		if split, err = send(ctx, x, r, reqs[i], x.waitAlone); split {
			reqs = slices.Insert(reqs, i+1, reqs[i].Split()...)
		}
	}
	x.reportApplied(svc, r.applied)
	if denied != nil {
		for _, m := range r.applied {
			denied.Applied = append(denied.Applied, m.Label())
		}
		x.event(svc, corev1.EventTypeWarning, ReasonPolicyDenied, denied.summary())
	}
	if err != nil {
		return nil, err
	}
	state, err := x.result(ctx, r)
	if err != nil || denied == nil {
		return state, err
	}
	return state, denied
}

// result returns the load balancer after a successful run; see Run.
func (x *Executor) result(ctx context.Context, r *run) (*lbplan.Actual, error) {
	if !r.state.PrivateIPUnknown() { // deleted, or current for the status
		return r.state, nil
	}
	reloaded, _, err := x.client.LoadBalancer.GetByID(ctx, r.state.ID)
	if err != nil {
		return nil, fmt.Errorf("reload load balancer %d: %w", r.state.ID, err)
	}
	if reloaded == nil {
		return nil, fmt.Errorf("reload load balancer %d: not found", r.state.ID)
	}
	return lbplan.NewActual(reloaded), nil
}

// lbName is the name of the load balancer a, for logs; "" before the create.
func lbName(a *lbplan.Actual) string {
	if a == nil {
		return ""
	}
	return a.Name
}

// reportApplied emits one Normal event for the changes that ran, in the order they ran.
func (x *Executor) reportApplied(svc *corev1.Service, applied []lbplan.Mutation) {
	if len(applied) == 0 {
		return
	}
	reason := ReasonLoadBalancerUpdated
	labels := make([]string, len(applied))
	for i, m := range applied {
		labels[i] = m.Label()
		switch m.Action() {
		case policy.ActionLoadBalancerCreate:
			reason = ReasonLoadBalancerCreated
		case policy.ActionLoadBalancerDelete:
			reason = ReasonLoadBalancerDeleted
		}
	}
	x.event(svc, corev1.EventTypeNormal, reason, truncate.String("applied: "+strings.Join(labels, ", "), truncate.EventMessage))
}

// gate decides plan for svc (Decide) and returns the plan that runs, with a *DeniedError for
// the steps that do not (nil when nothing is denied). It records the PolicyWarning and
// PolicyDryRunDenied events of the steps' last decisions and counts each denied mutation; the
// PolicyDenied event is runGated's, once it knows what was applied.
func (x *Executor) gate(ctx context.Context, svc *corev1.Service, plan lbplan.Plan) (lbplan.Plan, *DeniedError) {
	plan = x.withPricing(plan)
	service, inputErr := x.policyService(svc)
	rev, named := x.PolicyRevision() // before the decisions: see decidedDigest
	v := Decide(ctx, plan, x.cluster, service, func(ctx context.Context, in policy.Input) policy.Decision {
		return x.decide(ctx, gateItem{inputErr: inputErr, input: in})
	})
	labels := make([]string, len(v.Steps))
	decisions := make([]policy.Decision, len(v.Steps))
	for i, st := range v.Steps {
		labels[i], decisions[i] = st.Label, st.Decision
	}
	x.decisionEvents(svc, labels, decisions)
	if !v.Denied() {
		return v.Run, nil
	}
	denied := x.deniedError(labels, decisions, func(i int) policy.Input { return v.Steps[i].Input })
	if inputErr == nil {
		denied.Inputs = decidedDigest(rev, named, Inputs(plan, x.cluster, service), decisions)
	}
	for _, st := range v.Steps {
		if !st.Runs && !st.Denied() {
			denied.Skipped = append(denied.Skipped, st.Label+" ("+st.SkipReason()+")")
		}
	}
	return v.Run, denied
}

// DeniedSteps decides every step of plan for svc exactly as the gate of Run does (the same
// Inputs) and returns the indices, in plan.Steps() order, of the steps it denies; nil when all
// are allowed. It sends nothing, records no event and counts no mutation; the decider counts
// and logs its decisions like any others (the admission webhook's are too). The load balancer
// code uses it to find which members of a group a plan is denied for before it runs the plan
// (Run then decides the plan it runs again: the gate stays the one that counts).
func (x *Executor) DeniedSteps(ctx context.Context, svc *corev1.Service, plan lbplan.Plan) []int {
	plan = x.withPricing(plan)
	service, inputErr := x.policyService(svc)
	var out []int
	for i, st := range Inputs(plan, x.cluster, service) {
		if d := x.decide(ctx, gateItem{label: st.Label, inputErr: inputErr, input: st.Input}); !d.Allowed {
			out = append(out, i)
		}
	}
	return out
}

// StepInput is one mutation of a plan as the gate decides it: its label (Step.Label) and its
// policy input.
type StepInput struct {
	Label string
	Input policy.Input
}

// Inputs returns the policy input of every step of plan (plan.Steps, in order) for the Service
// view service (PolicyService) in cluster. It is pure. The gate of Run decides exactly these
// inputs, and `hcloud-policy-ccm plan` calls it too, so CI and the CCM cannot build different
// inputs (enforced by the code path: gate calls Inputs; TestPlanMatchesCCM in ccm/ciplan
// compares the verdicts).
//
// With plan.Pricing set, every input carries input.inventory, the inventory before its step
// (plan.Pricing.Inventory with the earlier steps of the plan applied: inventory.Apply), and
// input.cost (inventory.StepCost of the load balancer before and after the step).
func Inputs(plan lbplan.Plan, cluster policy.Cluster, service *policy.Service) []StepInput {
	steps := plan.Steps()
	out := make([]StepInput, 0, len(steps))
	var inv policy.Inventory
	if plan.Pricing != nil {
		inv = plan.Pricing.Inventory
	}
	for i, st := range steps {
		in := stepInput(plan, st, cluster, service)
		if p := plan.Pricing; p != nil {
			in.Inventory, in.Cost = priced(inv, in, p.Prices)
			if i < len(steps)-1 { // the inventory after the last step is no step's
				inv = inventory.Apply(inv, in, p.Prices)
			}
		}
		out = append(out, StepInput{Label: st.Label(), Input: in})
	}
	return out
}

// priced returns the inventory and the cost that the input of a step carries: inv is the
// inventory before the step.
func priced(inv policy.Inventory, in policy.Input, prices inventory.Prices) (*policy.Inventory, *policy.Cost) {
	after := in.LoadBalancer
	if in.Action == policy.ActionLoadBalancerDelete {
		after = nil
	}
	cost := inventory.StepCost(in.Current, after, prices)
	return &inv, &cost
}

// stepInput is the input of one step of plan, without inventory and cost.
func stepInput(plan lbplan.Plan, st lbplan.Step, cluster policy.Cluster, service *policy.Service) policy.Input {
	return policy.Input{
		Version:      policy.InputVersion,
		Action:       st.Mutation.Action(),
		Operation:    st.Mutation.Operation(),
		Cluster:      cluster,
		Service:      service,
		LoadBalancer: st.LoadBalancer,
		Current:      st.Current,
		Final:        st.Final,
		Target:       st.Target,
		Listener:     st.Listener,
		Certificate:  st.Certificate,
		Group:        plan.Group,
	}
}

// gateItem is one mutation as the gate decides it: its label and its policy input.
type gateItem struct {
	label string
	input policy.Input
	// inputErr is set when the input could not be completed (namespace labels unreadable):
	// the decision is then an evaluation failure (policy.InputFailer), never an input with
	// the field null.
	inputErr error
}

// decide decides one item; see gateItem.inputErr.
func (x *Executor) decide(ctx context.Context, it gateItem) policy.Decision {
	if it.inputErr != nil {
		if f, ok := x.decider.(policy.InputFailer); ok {
			return f.DecideFailed(ctx, it.input, it.inputErr)
		}
		// A decider that cannot fail an input (policy.AllowAll: no policy) decides without
		// the field; no rule can depend on it.
	}
	return x.decider.Decide(ctx, it.input)
}

// decideAll is the gate of route plans: it decides every item before anything runs, records
// the PolicyWarning and PolicyDryRunDenied events (decisionEvents) and, when any item is
// denied, counts each denied mutation, puts one Warning event PolicyDenied on obj naming every
// denial, and returns a *DeniedError (wrapping policy.ErrDenied): a route plan is all or
// nothing.
func (x *Executor) decideAll(ctx context.Context, obj runtime.Object, items []gateItem) error {
	labels := make([]string, len(items))
	decisions := make([]policy.Decision, len(items))
	for i, it := range items {
		labels[i], decisions[i] = it.label, x.decide(ctx, it)
	}
	x.decisionEvents(obj, labels, decisions)
	if !slices.ContainsFunc(decisions, func(d policy.Decision) bool { return !d.Allowed }) {
		return nil
	}
	denied := x.deniedError(labels, decisions, func(i int) policy.Input { return items[i].input })
	x.event(obj, corev1.EventTypeWarning, ReasonPolicyDenied, denied.summary())
	// DeniedError wraps policy.ErrDenied: callers match it, and the service and route
	// controllers retry the returned error with backoff.
	return denied
}

// decisionEvents records the warnings (and warn rules that failed) and the deny messages that
// are not enforced (dry-run mode, or "enforcement": "dryrun") of the decisions of the steps
// labels as one Warning event each on obj: PolicyWarning and PolicyDryRunDenied, both naming
// each step's decision ID as PolicyDenied does.
func (x *Executor) decisionEvents(obj runtime.Object, labels []string, decisions []policy.Decision) {
	var dryRun, warnings messageGroups
	for i, d := range decisions {
		warnings.add(withDecisionID(labels[i], d.ID), DecisionWarnings(d))
		dryRun.add(withDecisionID(labels[i], d.ID), d.NotEnforced())
	}
	if warnings.Len() > 0 {
		x.event(obj, corev1.EventTypeWarning, ReasonPolicyWarning, warnings.String())
	}
	if dryRun.Len() > 0 {
		x.event(obj, corev1.EventTypeWarning, ReasonPolicyDryRunDenied, "would be denied (dry run): "+dryRun.String())
	}
}

// withDecisionID is label followed by the decision ID, which traces a denial from kubectl to
// its decision log line; label alone when the decider gives no ID.
func withDecisionID(label, id string) string {
	if id == "" {
		return label
	}
	return label + " (decision " + id + ")"
}

// deniedError counts each denied mutation among the decisions of the steps labels (input
// gives the input of step i) and returns the *DeniedError naming them.
func (x *Executor) deniedError(labels []string, decisions []policy.Decision, input func(i int) policy.Input) *DeniedError {
	var denied messageGroups
	e := &DeniedError{Of: len(decisions)}
	for i, d := range decisions {
		if d.Allowed {
			continue
		}
		denied.add(withDecisionID(labels[i], d.ID), DenyMessages(d))
		countMutation(input(i).Action, input(i).Operation, resultDenied)
		e.Denied++
		if d.Err != nil {
			e.Failed++
		}
	}
	e.Messages = denied.String()
	return e
}

// DeniedError is returned when the policy denies at least one step of a plan. It wraps
// policy.ErrDenied.
type DeniedError struct {
	Denied, Of int
	// Failed is how many of the Denied steps were denied because their evaluation failed
	// (policy.Decision.Err under the failure mode closed) rather than by a deny message. Such
	// a denial may pass on the next try with the same input (a deadline, an unreadable
	// namespace).
	Failed int
	// Messages are the grouped deny messages, truncated to an event message's size.
	Messages string
	// Applied are the labels of the mutations that ran, in order (steps fail alone: Run); empty
	// when nothing changed.
	Applied []string
	// Skipped are the steps that did not run because they need a step that does not
	// ("add_target(server:3) (needs attach_to_network(5))").
	Skipped []string
	// Inputs is the digest of what was decided (PlanDigest of the plan the gate was given):
	// the policy revision and the policy input of every step. "" when the decisions name no one
	// revision or the input could not be completed. The load balancer code remembers a denial
	// under it (ccm/loadbalancer's denial cache).
	Inputs string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("%d of %d changes denied, %s", e.Denied, e.Of, e.summary())
}

// summary is the message of the PolicyDenied event: "nothing changed: MESSAGES" when nothing
// ran, else "applied: LABELS; denied: MESSAGES", each followed by "; skipped: STEPS" when
// steps were skipped with the denied ones; truncated to an event message's size.
func (e *DeniedError) summary() string {
	msg := "nothing changed: " + e.Messages
	if len(e.Applied) > 0 {
		msg = "applied: " + listLabels(e.Applied) + "; denied: " + e.Messages
	}
	if len(e.Skipped) > 0 {
		msg += "; skipped: " + listLabels(e.Skipped)
	}
	return truncate.String(msg, truncate.EventMessage)
}

// Unwrap lets errors.Is(err, policy.ErrDenied) match.
func (e *DeniedError) Unwrap() error { return policy.ErrDenied }

// Remaining is the denial as a retry of the same inputs meets it once the applied steps are in:
// its plan holds only the denied steps and those skipped with them, and nothing changes. e is
// not modified.
func (e *DeniedError) Remaining() *DeniedError {
	c := *e
	c.Applied, c.Of = nil, e.Denied+len(e.Skipped)
	return &c
}

// DecisionWarnings are the warnings of d (as the PolicyWarning event and plan show them), plus an evaluation failure that the failure mode
// resolved to allow and a failure of the warn rules alone (neither may pass silently). A failure
// that only dry-run mode allowed is not a warning: d.NotEnforced reports it (PolicyDryRunDenied).
func DecisionWarnings(d policy.Decision) []policy.Message {
	out := d.Warn
	if d.Err != nil && d.Allowed && !d.DryRun {
		out = append(append([]policy.Message{}, out...), policy.Message{Msg: "policy evaluation failed, allowed by the failure mode: " + d.Err.Error()})
	}
	if d.WarnErr != nil {
		out = append(append([]policy.Message{}, out...), policy.Message{Msg: d.WarnErr.Error()})
	}
	return out
}

// DenyMessages are the messages that deny d (as the PolicyDenied event and plan show them): its blocking deny messages, else its evaluation
// failure.
func DenyMessages(d policy.Decision) []policy.Message {
	if b := d.Blocking(); len(b) > 0 {
		return b
	}
	if d.Err != nil {
		return []policy.Message{{Msg: policy.EvaluationFailedPrefix + d.Err.Error()}}
	}
	return []policy.Message{{Msg: "denied"}}
}

// policyService is the policy view of svc. The error says that the labels of its namespace
// could not be read (not in the informer's cache, or no permission to list namespaces): the
// decisions are then evaluation failures (see gateItem.inputErr). Without a namespace lister
// (Options.Namespaces nil) namespace_labels is null.
func (x *Executor) policyService(svc *corev1.Service) (*policy.Service, error) {
	if svc == nil {
		return nil, nil
	}
	labels, err := x.NamespaceLabels(svc.Namespace)
	return PolicyService(svc, labels), err
}

// PolicyService is the policy view of svc, with nsLabels as the labels of its namespace; nil
// for a nil svc. It is pure and copies what it takes from svc. The annotations leave out
// annotation.PolicyRetry, the CCM's own trigger of a retry: a retry is decided on what the
// Service asks for, not on when it was retried (TestPolicyService_leavesOutTheRetryAnnotation).
func PolicyService(svc *corev1.Service, nsLabels map[string]string) *policy.Service {
	if svc == nil {
		return nil
	}
	s := &policy.Service{
		Namespace:                svc.Namespace,
		Name:                     svc.Name,
		UID:                      string(svc.UID),
		Labels:                   copyMap(svc.Labels),
		Annotations:              withoutRetry(svc.Annotations),
		Ports:                    []policy.ServicePort{},
		LoadBalancerSourceRanges: append([]string{}, svc.Spec.LoadBalancerSourceRanges...),
		ExternalTrafficPolicy:    string(svc.Spec.ExternalTrafficPolicy),
	}
	if svc.Spec.LoadBalancerClass != nil {
		s.LoadBalancerClass = *svc.Spec.LoadBalancerClass
	}
	if nsLabels != nil { // nil stays null: no namespace lister (see NamespaceLabels)
		s.NamespaceLabels = copyMap(nsLabels)
	}
	for _, p := range svc.Spec.Ports {
		s.Ports = append(s.Ports, policy.ServicePort{Name: p.Name, Protocol: string(p.Protocol), Port: p.Port, NodePort: p.NodePort})
	}
	return s
}

// PolicyRevision returns the policy revision in force and whether there is one the decider
// names: policy.Engine names its revision; policy.AllowAll, an engine before its first
// revision and deciders without a Revision method do not.
func (x *Executor) PolicyRevision() (string, bool) {
	r, ok := x.decider.(interface{ Revision() string })
	if !ok {
		return "", false
	}
	rev := r.Revision()
	return rev, rev != ""
}

// ErrNamespacesForbidden is what a namespace lister returns when the CCM may not list and watch
// namespaces (checked once at start, where the log line and the event NamespacesForbidden name
// the missing permission): every decision about a Service is then an evaluation error, reported
// in dry run and handled by --policy-failure-mode in enforce.
var ErrNamespacesForbidden = errors.New("the CCM may not list and watch namespaces (named once at start: log line and event NamespacesForbidden)")

// NamespaceLabels returns a copy of the labels of namespace ns as the policy input carries
// them; nil (and no error) without a namespace lister. No request leaves the process: the
// lister reads the informer's cache.
//
// # Errors
//
// An error names the namespace and the fix when the labels cannot be read: the namespace is
// not in the cache (not synced yet, or the CCM may not list and watch namespaces).
func (x *Executor) NamespaceLabels(ns string) (map[string]string, error) {
	if x.namespaces == nil {
		return nil, nil
	}
	n, err := x.namespaces.Get(ns)
	if errors.Is(err, ErrNamespacesForbidden) { // the fix was named once at start
		return nil, fmt.Errorf("namespace_labels: cannot read the labels of namespace %q: %w", ns, err)
	}
	if err != nil {
		return nil, fmt.Errorf("namespace_labels: cannot read the labels of namespace %q (the CCM needs get, list and watch on namespaces; see the ClusterRole in deploy/chart/templates/rbac.yaml): %w", ns, err)
	}
	return copyMap(n.Labels), nil
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// event records an event on obj. A run on behalf of no Service (obj a nil *corev1.Service, see
// Run) has no object to put it on: the event is logged instead.
func (x *Executor) event(obj runtime.Object, typ, reason, msg string) {
	if svc, ok := obj.(*corev1.Service); obj == nil || ok && svc == nil {
		klog.InfoS("Event without an object to record it on", "type", typ, "reason", reason, "message", msg)
		return
	}
	x.recorder.Event(obj, typ, reason, msg)
}

// nodeRef references a Node by name for events.
func nodeRef(name string) runtime.Object {
	return &corev1.ObjectReference{Kind: "Node", Name: name, UID: types.UID(name)}
}

// withoutRetry is a copy of annotations without annotation.PolicyRetry.
func withoutRetry(annotations map[string]string) map[string]string {
	out := copyMap(annotations)
	delete(out, annotation.PolicyRetry)
	return out
}

// Package executor is the only code of the CCM that writes to the Hetzner Cloud API. Run
// decides every request of a load balancer plan through the gate (ccm/gate, pure: the inputs,
// the verdict, the messages) before it sends the first one, and sends only the part of the plan
// the verdict lets run; RunRoutes (and AddRoute/DeleteRoute) gate route changes the same way.
// It records the decisions' events and counts the denied mutations. It writes through the
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
// Start with New, then Run (load balancers; or its two halves, Decide and Send), RunDetached
// (UpdateLoadBalancer's target changes: returns once the API accepted the first request, the
// rest ends in the background; detach.go) and RunRoutes (routes).
package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor/internal/writeclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/truncate"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
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
	client   *hcloud.Client
	gate     gate.Gate
	recorder record.EventRecorder
	actions  actionWaiter // batched action polls of route writes (RunRoutes) and detached runs (detach.go)
	detached detached     // the detached runs in flight (detach.go)
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
	Cluster input.Cluster
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
	g := gate.Gate{Decider: o.Decider, Cluster: o.Cluster}
	if o.Namespaces != nil {
		g.NamespaceLabels = gate.ListerLabels(o.Namespaces)
	}
	return &Executor{
		client: writeclient.New(o.Conn), gate: g, recorder: o.Recorder,
		actions: actionWaiter{interval: o.ActionPollInterval},
	}, nil
}

// Gate is the gate Run decides with: the CCM's load balancer code, the webhook and the audit
// decide with the same one (same decider, cluster and namespace labels).
func (x *Executor) Gate() gate.Gate { return x.gate }

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
	d, err := x.Decide(ctx, svc, plan)
	if err != nil {
		return nil, err
	}
	return x.Send(ctx, d)
}

// Decided is a plan the gate has decided (Decide): the part of it that runs and the denial of
// the rest. Only Decide makes one (its fields are unexported: the compiler keeps every other
// package from building one), and Send sends nothing else, so a plan the gate did not decide
// cannot be sent through it; the zero Decided is refused (ErrRefused).
type Decided struct {
	svc    *corev1.Service
	run    lbplan.Plan
	denied *gate.DeniedError
	made   bool
}

// Decide is Run's first half: it vets plan's kinds, waits for a detached run of svc in flight
// (Settle) and decides plan through the gate, recording the decisions' events; it sends
// nothing. Run is Decide then Send; the load balancer code calls the two itself so that its
// path to the HTTP client is one frame shorter (TestFrames_EnsureLoadBalancerToTheHTTPClient).
//
// # Errors
//
// A refusal of a kind (ErrRefused) or the ctx error of Settle; a denial is no error here: it is
// part of the Decided, and Send reports it.
func (x *Executor) Decide(ctx context.Context, svc *corev1.Service, plan lbplan.Plan) (Decided, error) {
	if plan.Empty() {
		return Decided{svc: svc, run: plan, made: true}, nil
	}
	if err := vetKinds(plan.Mutations); err != nil {
		return Decided{}, err
	}
	if svc != nil {
		if err := x.Settle(ctx, svc.UID); err != nil {
			return Decided{}, err
		}
	}
	run, denied := x.decidePlan(ctx, svc, plan)
	return Decided{svc: svc, run: run, denied: denied, made: true}, nil
}

// Send is Run's second half: it sends the requests of the part of the plan d lets run and
// reports the denial of the rest (see Run, which it returns as).
func (x *Executor) Send(ctx context.Context, d Decided) (*lbplan.Actual, error) {
	svc, plan, denied := d.svc, d.run, d.denied
	switch {
	case !d.made:
		return nil, fmt.Errorf("%w: a plan the gate did not decide (executor.Decide)", ErrRefused)
	case denied != nil && plan.Empty():
		x.event(svc, corev1.EventTypeWarning, ReasonPolicyDenied, denied.Summary())
		return nil, denied
	case plan.Empty():
		return plan.Actual, nil
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
		x.event(svc, corev1.EventTypeWarning, ReasonPolicyDenied, denied.Summary())
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
		case input.ActionLoadBalancerCreate:
			reason = ReasonLoadBalancerCreated
		case input.ActionLoadBalancerDelete:
			reason = ReasonLoadBalancerDeleted
		}
	}
	x.event(svc, corev1.EventTypeNormal, reason, truncate.String("applied: "+strings.Join(labels, ", "), truncate.EventMessage))
}

// gate decides plan for svc (gate.Gate.Decide) and returns the plan that runs, with a
// *gate.DeniedError for the steps that do not (nil when nothing is denied). It records the
// PolicyWarning and PolicyDryRunDenied events of the steps' last decisions and counts each
// denied mutation; the PolicyDenied event is Send's, once it knows what was applied. The
// plan is decided with the Pricing it carries: whoever plans prices it (lbplan.Plan.Pricing).
func (x *Executor) decidePlan(ctx context.Context, svc *corev1.Service, plan lbplan.Plan) (lbplan.Plan, *gate.DeniedError) {
	v := x.gate.Decide(ctx, plan, svc)
	steps := make([]gate.StepDecision, len(v.Steps))
	for i, st := range v.Steps {
		steps[i] = gate.StepDecision{StepInput: st.StepInput, Decision: st.Decision}
	}
	x.decisionEvents(svc, steps)
	x.countDenied(steps)
	return v.Run, v.DeniedError()
}

// decideAll is the gate of route plans: it decides every step before anything runs, records
// the PolicyWarning and PolicyDryRunDenied events (decisionEvents) and, when any step is
// denied, counts each denied mutation, puts one Warning event PolicyDenied on obj naming every
// denial, and returns a *gate.DeniedError (wrapping policy.ErrDenied): a route plan is all or
// nothing.
func (x *Executor) decideAll(ctx context.Context, obj runtime.Object, inputs []gate.StepInput) error {
	steps := make([]gate.StepDecision, len(inputs))
	labels := make([]string, len(inputs))
	decisions := make([]policy.Decision, len(inputs))
	for i, in := range inputs {
		d := x.gate.DecideInput(ctx, in.Input)
		steps[i], labels[i], decisions[i] = gate.StepDecision{StepInput: in, Decision: d}, in.Label, d
	}
	x.decisionEvents(obj, steps)
	if !slices.ContainsFunc(decisions, func(d policy.Decision) bool { return !d.Allowed }) {
		return nil
	}
	x.countDenied(steps)
	denied := gate.NewDeniedError(labels, decisions)
	x.event(obj, corev1.EventTypeWarning, ReasonPolicyDenied, denied.Summary())
	// DeniedError wraps policy.ErrDenied: callers match it, and the service and route
	// controllers retry the returned error with backoff.
	return denied
}

// countDenied counts each denied step as hcloud_ccm_mutations_total{result="denied"}.
func (x *Executor) countDenied(steps []gate.StepDecision) {
	for _, st := range steps {
		if !st.Decision.Allowed {
			countMutation(st.Input.Action, st.Input.Operation, resultDenied)
		}
	}
}

// decisionEvents records the warnings (and warn rules that failed) and the deny messages that
// are not enforced (dry-run mode, or "enforcement": "dryrun") of the decisions of steps as one
// Warning event each on obj: PolicyWarning and PolicyDryRunDenied, both naming each step's
// decision ID as PolicyDenied does.
func (x *Executor) decisionEvents(obj runtime.Object, steps []gate.StepDecision) {
	var dryRun, warnings gate.Messages
	for _, st := range steps {
		d := st.Decision
		warnings.Add(gate.WithDecisionID(st.Label, d.ID), gate.DecisionWarnings(d))
		dryRun.Add(gate.WithDecisionID(st.Label, d.ID), d.NotEnforced())
	}
	if warnings.Len() > 0 {
		x.event(obj, corev1.EventTypeWarning, ReasonPolicyWarning, warnings.String())
	}
	if dryRun.Len() > 0 {
		x.event(obj, corev1.EventTypeWarning, ReasonPolicyDryRunDenied, "would be denied (dry run): "+dryRun.String())
	}
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

// Package ciplan is `hcloud-policy-ccm plan`: what the CCM would do with Service manifests,
// and what the policies say about each step, without a cluster and without the network
// (StateFromAPI, for --from-api, only reads).
//
// It runs the CCM's own code: lbservice.NewDesired and lbplan.Compute plan the load balancer,
// gate.Gate builds the policy inputs the gate decides, and a
// policy.Engine loaded like the CCM's (policy.ReadDir, Engine.Load) decides them. A second
// evaluation path would drift; TestPlanMatchesCCM runs this package and the executor's gate on
// the same Services and compares the verdicts.
//
// Start with ReadManifests, then Run; Report.WriteText or Report.WriteJSON print the result,
// Report.After and WriteState save the state it would leave.
package ciplan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// Exit statuses of the plan command.
const (
	ExitAllowed  = 0
	ExitDenied   = 1
	ExitBadInput = 2
)

// State is the current state plan starts from: the load balancers, in the JSON shape of the
// Hetzner API's GET /v1/load_balancers answer ({"load_balancers": [...]}), so a saved API
// answer is a state file too.
type State struct {
	LoadBalancers []*hcloud.LoadBalancer
}

// ReadState reads a state file (see State).
func ReadState(path string) (State, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return State{}, fmt.Errorf("read state: %w", err)
	}
	var resp schema.LoadBalancerListResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		return State{}, fmt.Errorf("read state %s: %w (want the JSON of GET /v1/load_balancers: {\"load_balancers\": [...]})", path, err)
	}
	var st State
	for _, lb := range resp.LoadBalancers {
		st.LoadBalancers = append(st.LoadBalancers, hcloud.LoadBalancerFromSchema(lb))
	}
	return st, nil
}

// find returns the load balancer of svc as the CCM finds it: by the Service UID label, else
// by name; nil when there is none.
func (s State) find(svc *corev1.Service, name string) *hcloud.LoadBalancer {
	if svc.UID != "" {
		for _, lb := range s.LoadBalancers {
			if lb.Labels[lbplan.LabelServiceUID] == string(svc.UID) {
				return lb
			}
		}
	}
	for _, lb := range s.LoadBalancers {
		if lb.Name == name {
			return lb
		}
	}
	return nil
}

// Options are the inputs of Run besides the manifests.
type Options struct {
	// Config is the CCM's environment (config.Read); only its load balancer defaults are used.
	Config config.Config
	// Cluster is the cluster of the policy input (--cluster-name, --cluster-cidr).
	Cluster input.Cluster
	// Decider decides each step; the CCM's is a *policy.Engine.
	Decider policy.Decider
	// State is the current state; empty means every Service is a create.
	State State
	// Prices price the load balancers (--prices, --from-api); the zero value knows no price,
	// and every cost is then unknown (Cost.Known false).
	Prices inventory.Prices
	// pricing is what the Service being planned is decided against (lbplan.Plan.Pricing).
	pricing *lbplan.Pricing
}

// Report is the outcome of a plan: one ServiceResult per Service manifest of type
// LoadBalancer, in input order. Its JSON is the schema of `plan -o json` (docs/policy.md § In
// CI: plan).
type Report struct {
	// Revision is the policy revision that decided.
	Revision string `json:"revision"`
	// Allowed is false when any step of any Service is denied.
	Allowed bool `json:"allowed"`
	// Errors are the bad input that is no Service's: documents that could not be read.
	Errors   []string        `json:"errors"`
	Services []ServiceResult `json:"services"`
	// Cost is the monthly price of every load balancer the cluster manages (the state's, and
	// those the plans create) before and after the steps that run.
	Cost *Cost `json:"cost"`
	// priced is true when Run had prices (Options.Prices).
	priced bool
}

// ServiceResult is the plan of one Service.
type ServiceResult struct {
	Source    Source `json:"source"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// UID is the Service's UID, PlaceholderUID's when the manifest has none.
	UID string `json:"uid"`
	// LoadBalancer is the load balancer's name; Exists is true when the state has it.
	LoadBalancer string `json:"load_balancer"`
	Exists       bool   `json:"exists"`
	// Error is bad input (an annotation, an unusable combination): the CCM would refuse the
	// Service before any write. Steps is then empty.
	Error   string `json:"error,omitempty"`
	Allowed bool   `json:"allowed"`
	Steps   []Step `json:"steps"`
	// Final is the load balancer after every step, in the policy input's shape; null when the
	// Service has an error.
	Final *input.LoadBalancer `json:"final"`
	// Cost is the monthly price of the Service's load balancer before and after its plan
	// (after: as the plan asks, also when a step is denied); null when the Service has an error.
	Cost *Cost `json:"cost"`
	// final is the planner's load balancer after the steps that run (nil: none, or an error),
	// for After; ran is true when at least one step runs.
	final *lbplan.Actual
	ran   bool
	// seq orders the plans as they were made (retryGroupMembers plans some again), for After.
	seq int
	// group is the Service's load balancer group ("" for none) and groupVersion how many
	// changes of the group's load balancer its plan saw (groupState.version).
	group        string
	groupVersion int
}

// Step is one request the CCM would send, with its verdict.
type Step struct {
	Label     string `json:"label"`
	Action    string `json:"action"`
	Operation string `json:"operation"`
	// DecisionID is the decision's ID (policy.Decision.ID): the decision_id of its line in the
	// decision log that `plan --decision-log` writes, as the PolicyDenied event and the
	// admission webhook name it. "" when the decider gives none.
	DecisionID string `json:"decision_id"`
	Allowed    bool   `json:"allowed"`
	// Runs is true when the CCM would send the step: it is allowed and needs no step that does
	// not run (steps fail alone, gate.Gate.Decide).
	Runs bool `json:"runs"`
	// Skipped says why an allowed step does not run ("needs add_service(443)", "a create or
	// delete is all or nothing"); "" for a step that runs or is denied.
	Skipped string `json:"skipped,omitempty"`
	// DryRun is true when deny messages were reported but not enforced.
	DryRun bool `json:"dry_run"`
	// Deny are the messages that deny the step (gate.DenyMessages: the PolicyDenied
	// event's); empty when allowed.
	Deny []policy.Message `json:"deny"`
	// NotEnforced are deny messages that do not block (dry run).
	NotEnforced []policy.Message `json:"not_enforced"`
	// Warn are the warnings (gate.DecisionWarnings: the PolicyWarning event's).
	Warn []policy.Message `json:"warn"`
	// Requests are the API requests of the step as the CCM builds them (one; the executor
	// sends a create split when the API refuses what rides along).
	Requests []Request `json:"requests"`
}

// Request is an API request of a step (lbplan.Plan.APIRequests): after a create, the load
// balancer's ID in the path is lbplan.PlaceholderID (0) and its address in a change_dns_ptr
// body lbplan.PlaceholderIPv4 or PlaceholderIPv6; a listener using the certificate the plan
// creates names certificate 0.
type Request struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	// Body is the JSON body, null for none.
	Body json.RawMessage `json:"body"`
}

// stepRequests returns the requests of plan by the label of their mutation (Step.Label).
func stepRequests(plan lbplan.Plan) (map[string][]Request, error) {
	planned, err := plan.APIRequests()
	if err != nil {
		return nil, err
	}
	out := make(map[string][]Request, len(planned))
	for _, p := range planned {
		b, err := p.Request.JSON()
		if err != nil {
			return nil, err
		}
		out[p.Label] = append(out[p.Label], Request{Method: p.Request.Method, Path: p.Request.Path, Body: b})
	}
	return out, nil
}

// ExitCode is the exit status for r: ExitBadInput when any input is bad, else ExitDenied when
// any step is denied, else ExitAllowed.
func (r Report) ExitCode() int {
	if len(r.Errors) > 0 {
		return ExitBadInput
	}
	for _, s := range r.Services {
		if s.Error != "" {
			return ExitBadInput
		}
	}
	if !r.Allowed {
		return ExitDenied
	}
	return ExitAllowed
}

// Run plans every Service of m of type LoadBalancer and decides each step with o.Decider.
// Namespace labels come from the Namespace manifests of m; a Service in a namespace without
// one gets no labels (an empty map): label the namespace in the input to plan with them.
// Run makes no network request.
func Run(ctx context.Context, m Manifests, o Options) Report {
	r := Report{Allowed: true, Errors: []string{}, Services: []ServiceResult{}}
	if rev, ok := o.Decider.(interface{ Revision() string }); ok {
		r.Revision = rev.Revision()
	}
	for _, p := range m.Problems {
		r.Errors = append(r.Errors, p.Error())
	}
	groups := newGroupState(m)
	costs := newCosts(o.State, m, o.Prices)
	before := costs.inv
	var planned []Manifest // of r.Services
	for _, mf := range m.Services {
		if mf.Service.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		r.Services = append(r.Services, planService(ctx, mf, namespaceLabels(m, mf), o, groups, costs))
		planned = append(planned, mf)
	}
	retryGroupMembers(ctx, m, planned, o, groups, costs, r.Services)
	r.Cost, r.priced = costs.total(before), !o.Prices.Empty()
	for _, res := range r.Services {
		if !res.Allowed {
			r.Allowed = false
		}
	}
	return r
}

// retryGroupMembers plans again, in input order, each denied member of a load balancer group
// whose group's load balancer an allowed plan changed since the member's last plan, until no
// plan changes a group any more; results (of planned) gets the member's last plan. So a verdict
// is the one the CCM converges to: the service controller retries a denied Service with
// backoff, and the CCM decides a group member again once another member's sync changed the
// group's load balancer (the denial cache's digest counts those writes). For example, a member
// that syncs first asks for the group's create and is denied for a reason of its own; once
// another member created the load balancer, its retry may have nothing left to do. A denied
// member whose other steps run (steps fail alone) changes its group too; its own change is no
// reason to plan it again, another member's is. It ends: an allowed member is not planned
// again, and a denied member at most once per round (the rounds are also capped at one per
// Service, a guard the tests never reach).
func retryGroupMembers(ctx context.Context, m Manifests, planned []Manifest, o Options, groups *groupState, costs *costs, results []ServiceResult) {
	for round, changed := 0, true; changed && round <= len(results); round++ {
		changed = false
		for i, res := range results {
			if res.Allowed || res.Error != "" || res.group == "" || res.groupVersion == groups.version[res.group] {
				continue
			}
			before := groups.version[res.group]
			results[i] = planService(ctx, planned[i], namespaceLabels(m, planned[i]), o, groups, costs)
			changed = changed || groups.version[res.group] != before
		}
	}
}

// namespaceLabels are the labels of mf's namespace from the Namespace manifests of m; {} for a
// namespace m does not declare.
func namespaceLabels(m Manifests, mf Manifest) map[string]string {
	if l := m.Namespaces[mf.Service.Namespace]; l != nil {
		return l
	}
	return map[string]string{}
}

// gate is the CCM's gate for a Service whose namespace has the labels nsLabels.
func (o Options) gate(nsLabels map[string]string) gate.Gate {
	return gate.Gate{Decider: o.Decider, Cluster: o.Cluster, NamespaceLabels: func(string) (map[string]string, error) { return nsLabels, nil }}
}

// planService plans and decides one Service against the inventory of costs (lbplan.Plan.Pricing:
// gate.Inputs gives each step its input.inventory and input.cost), and puts the steps that
// run into it.
func planService(ctx context.Context, mf Manifest, nsLabels map[string]string, o Options, groups *groupState, costs *costs) ServiceResult {
	o.pricing = costs.pricing()
	svc := WithAPIDefaults(mf.Service)
	res := ServiceResult{Source: mf.Source, Namespace: svc.Namespace, Name: svc.Name, UID: string(svc.UID), Allowed: true, Steps: []Step{}}
	var plan lbplan.Plan
	var err error
	group, gerr := annotation.Group(svc)
	if errors.Is(gerr, annotation.ErrNotSet) {
		name, rename := lbName(svc)
		res.LoadBalancer = name
		lb := o.State.find(svc, name)
		res.Exists = lb != nil
		plan, err = compute(svc, name, rename, lb, o)
	} else {
		plan, err = groups.plan(ctx, svc, group, gerr, o, nsLabels, &res)
	}
	if err != nil {
		res.Error = fmt.Sprintf("%s: Service %s/%s: %v", mf.Source, svc.Namespace, svc.Name, err)
		return res
	}
	plan.Pricing = o.pricing
	requests, err := stepRequests(plan)
	if err != nil {
		res.Error = fmt.Sprintf("%s: Service %s/%s: %v", mf.Source, svc.Namespace, svc.Name, err)
		return res
	}
	v := o.gate(nsLabels).Decide(ctx, plan, svc)
	costs.applied(v)
	for _, i := range plan.SendOrder() { // the executor's send order (a managed certificate first)
		sv := v.Steps[i]
		d := sv.Decision
		st := Step{
			Label: sv.Label, Action: sv.Input.Action, Operation: sv.Input.Operation,
			DecisionID: d.ID, Allowed: d.Allowed, Runs: sv.Runs, DryRun: d.DryRun, Deny: []policy.Message{},
			NotEnforced: nonNil(d.NotEnforced()), Warn: nonNil(gate.DecisionWarnings(d)),
			Requests: requests[sv.Label],
		}
		if !d.Allowed {
			st.Deny = gate.DenyMessages(d)
			res.Allowed = false
		}
		st.Skipped = sv.SkipReason()
		res.Steps = append(res.Steps, st)
	}
	if steps := plan.Steps(); len(steps) > 0 {
		res.Final = steps[len(steps)-1].Final
	}
	// The state the CCM leaves is that of the steps that run (v.Run): all of them when nothing is
	// denied; on an existing load balancer, the ones a denied step does not skip (steps fail
	// alone); none for a denied create. The later members of a group plan from it.
	res.final, res.ran = v.Run.Actual, !v.Run.Empty()
	for _, m := range v.Run.Mutations {
		res.final = m.Apply(res.final)
	}
	if res.ran {
		groups.planned(v.Run, res.final)
		res.groupVersion = groups.version[res.group] // its own change is no reason to plan it again
	}
	res.seq = groups.next()
	if plan.Empty() && plan.Actual != nil {
		res.Final = plan.Actual.Policy(plan.IPv6)
	}
	asked := plan.Actual // the cost line shows what the plan asks, also when a step is denied
	for _, m := range plan.Mutations {
		asked = m.Apply(asked)
	}
	res.Cost = costs.serviceCost(policyOf(plan.Actual, plan.IPv6), policyOf(asked, plan.IPv6))
	return res
}

// compute is the CCM's planning of svc (ccm/loadbalancer reconcile) without the API: the name
// and node selector checks, lbservice.NewDesired with the environment's defaults and no nodes,
// and lbplan.Compute against lb.
func compute(svc *corev1.Service, name string, rename bool, lb *hcloud.LoadBalancer, o Options) (lbplan.Plan, error) {
	if err := lbservice.CheckService(svc, plugins.ValidateLoadBalancerName); err != nil {
		return lbplan.Plan{}, err
	}
	if err := lbservice.CheckName(name, o.Cluster.Name, ""); err != nil {
		return lbplan.Plan{}, err
	}
	d, err := lbservice.NewDesired(lbservice.DesiredInput{Service: svc, Name: name, Rename: rename, Defaults: o.Config.LoadBalancer})
	if err != nil {
		return lbplan.Plan{}, err
	}
	return lbplan.Compute(d, lbplan.NewActual(lb))
}

// lbName is the CCM's load balancer name without a naming plugin: the name annotation, else
// the default name from the Service UID (cloudprovider.DefaultLoadBalancerName). A manifest
// has no UID before it is applied: see PlaceholderUID.
func lbName(svc *corev1.Service) (string, bool) {
	if n, ok := lbservice.AnnotatedName(svc); ok {
		return n, true
	}
	return cloudprovider.DefaultLoadBalancerName(svc), false
}

func nonNil(m []policy.Message) []policy.Message {
	if m == nil {
		return []policy.Message{}
	}
	return m
}

// policyOf is a in the policy input's shape; nil for nil.
func policyOf(a *lbplan.Actual, ipv6 bool) *input.LoadBalancer {
	if a == nil {
		return nil
	}
	return a.Policy(ipv6)
}

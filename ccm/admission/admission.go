// Package admission is the CCM's validating admission webhook for Services of type
// LoadBalancer: at `kubectl apply` it plans the change the Service would cause against the
// current load balancer and evaluates the policies on that plan, so a denial reaches the
// Service's author before the Service is stored rather than as a PolicyDenied event afterwards.
//
// It runs the CCM's own code: the plan comes from the load balancer implementation's Preview
// (ccm/loadbalancer, the code EnsureLoadBalancer runs, without the executor), the policy inputs
// from gate.Gate (the executor's), the verdicts from the CCM's
// policy.Decider (its engine, revision and mode), and the messages from
// gate.DenyMessages and gate.DecisionWarnings. There is no second evaluation path.
//
// The CCM-side gate stays the authority: the webhook is registered with failurePolicy Ignore,
// answers "allowed" whenever it cannot plan, and a Service it admitted is still decided again
// when the CCM reconciles it.
//
// Start with New; Handler.Review answers one AdmissionRequest, Handler.AdmissionHandler is the
// function k8s.io/cloud-provider's webhook server (app.WebhookConfig) calls.
package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbgroup"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/requeue"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/truncate"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// Name is the webhook's name for --webhooks (k8s.io/cloud-provider's webhook server) and
// Path the URL path it serves. They MUST not change: the chart's
// ValidatingWebhookConfiguration and operators' --webhooks flags name them.
const (
	Name = "service-policy"
	Path = "/validate-service-policy"
)

// DefaultTimeout is how long Review may take before it gives up and admits (Config.Timeout).
// It stays below the 5 s timeoutSeconds the chart gives the API server, so the answer is the
// webhook's and not the API server's timeout.
const DefaultTimeout = 4 * time.Second

// WarningPrefix starts every warning and denial message, so kubectl's output names its source.
const WarningPrefix = "hcloud-policy-ccm: "

// maxWarning is the longest warning Review returns (bytes). The API server keeps warnings
// whole up to 4 KiB in total and cuts each to 256 characters beyond (k8s.io/apiserver's warning
// filter), so every warning starts with the steps and decision IDs and ends with the message.
const maxWarning = truncate.EventMessage

// Planner plans a Service's load balancer without writing to Hetzner.
// *loadbalancer.LoadBalancers implements it (Preview, PreviewDelete).
type Planner interface {
	// Preview is the plan EnsureLoadBalancer would run for svc with nodes; for a member of a
	// load balancer group, denied decides the steps as lbgroup.PlanGroup asks (the CCM's sync
	// leaves out the members the policy denies only for their listeners, and so does Preview).
	Preview(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node, denied lbgroup.DeniedSteps) (lbplan.Plan, error)
	// PreviewDelete is the plan EnsureLoadBalancerDeleted would run for svc.
	PreviewDelete(ctx context.Context, clusterName string, svc *corev1.Service) (lbplan.Plan, error)
}

// Config is what New needs: the CCM's planner, decider and policy input parts.
type Config struct {
	// Planner plans the load balancer (required).
	Planner Planner
	// Gate decides each step: the CCM's executor's (executor.Executor.Gate: the policy engine,
	// the cluster and the namespace labels of the informer's cache). Gate.Decider is required.
	Gate gate.Gate
	// ClusterName is --cluster-name, for the naming plugin and the labels of group load balancers.
	ClusterName string
	// Nodes returns the cluster's nodes (the node informer's cache); Review keeps those the
	// service controller gives EnsureLoadBalancer (LoadBalancerNodes). nil: no nodes.
	Nodes func() ([]*corev1.Node, error)
	// Synced reports whether the caches behind Gate.NamespaceLabels and Nodes have synced; until
	// they have, requests are admitted with a warning (an empty cache would make every
	// namespace unreadable, a failed decision). nil: always synced.
	Synced func() bool
	// ExemptUsers are the usernames whose requests are admitted without a plan: the CCM's own
	// service account (its status and retry-annotation writes must never be rejected).
	ExemptUsers []string
	// Timeout bounds one Review (default DefaultTimeout); past it the request is admitted
	// with a warning.
	Timeout time.Duration
	// Pricing returns what the gate prices plans with: the inventory of the CCM's caches and
	// the prices (loadbalancer.LoadBalancers.Pricing; it makes no request). Every reviewed
	// plan is decided against it, so the inputs carry input.inventory and input.cost as the
	// gate's do, and a warning names the change's monthly cost. nil: neither.
	Pricing func() *lbplan.Pricing
	// Serves reports whether the CCM serves a Service's load balancer
	// (loadbalancer.LoadBalancers.Serves: class-less Services unless
	// --load-balancer-class-only, and those of --load-balancer-class). nil: type LoadBalancer
	// without a loadBalancerClass.
	Serves func(*corev1.Service) bool
}

// Handler answers admission requests for Services. It is safe for concurrent use.
type Handler struct {
	cfg    Config
	exempt map[string]bool
}

// New returns a Handler.
//
// # Errors
//
// A missing Planner or Gate.Decider.
func New(c Config) (*Handler, error) {
	var errs []error
	if c.Planner == nil {
		errs = append(errs, errors.New("admission.New: Config.Planner is nil"))
	}
	if c.Gate.Decider == nil {
		errs = append(errs, errors.New("admission.New: Config.Gate.Decider is nil"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	h := &Handler{cfg: c, exempt: map[string]bool{}}
	for _, u := range c.ExemptUsers {
		h.exempt[u] = true
	}
	return h, nil
}

// AdmissionHandler answers req within Config.Timeout; it is the AdmissionHandler of
// k8s.io/cloud-provider's app.WebhookConfig, whose server passes no context. It never returns
// an error: every failure is an allowed response with a warning (see Review).
func (h *Handler) AdmissionHandler(req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.Timeout)
	defer cancel()
	return h.Review(ctx, req), nil
}

// Review answers one admission request. The response is never nil and denies only when the
// policies deny a step of the plan the request would cause:
//
//   - out of scope, admitted without a plan: anything but a CREATE or UPDATE of the core/v1
//     services resource itself (subresources such as status are out), a request of an exempt
//     user, a Service that the CCM does not serve before nor after (Config.Serves: not of
//     type LoadBalancer, or of a spec.loadBalancerClass other than --load-balancer-class), an UPDATE that
//     changes none of spec, labels and annotations (except requeue.Annotation, which the CCM
//     sets);
//   - a Service of type LoadBalancer is planned with Planner.Preview (the create or update of
//     its load balancer), a Service leaving the type with Planner.PreviewDelete;
//   - every step is decided as the gate decides it (gate.Gate.Decide, with the namespace labels
//     the gate reads and the inventory of Config.Pricing); a change that creates, deletes or
//     retypes a load balancer gets a warning with its monthly cost (costWarning); a step with blocking deny messages denies the request (HTTP 403,
//     Forbidden) with gate.DenyMessages and each decision's ID, so the denial can be
//     traced to the decision log, and names the steps the CCM would still run (steps fail
//     alone) or says that none would; warnings become admission warnings (kubectl prints
//     "Warning: ..."), and deny messages that are not enforced (--policy-mode=dryrun, or a
//     message with "enforcement": "dryrun") become warnings saying what would be denied;
//   - what cannot be decided is admitted with a warning: a bad annotation (the warning names it
//     and what it accepts: the CCM refuses the Service with the InvalidAnnotation event until
//     it is fixed, and that is the CCM's report, not the webhook's), a failed read, the
//     deadline, caches not synced yet (Config.Synced), an object that does not decode.
//
// TestReview and TestReview_NotSynced hold a case for each rule.
//
// # Why admit a bad annotation?
//
// The CCM owns annotation errors: it reports them on the Service where its operators look, and
// a webhook rejecting them would block Service writes whenever the webhook and the CCM
// disagree (during an upgrade). A warning tells the author at once without taking that risk.
func (h *Handler) Review(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req == nil {
		return allowed(nil)
	}
	var resp *admissionv1.AdmissionResponse
	switch svc, old, skip, err := h.scope(req); {
	case err != nil:
		resp = allowed([]string{WarningPrefix + err.Error()})
	case skip:
		resp = allowed(nil)
	default:
		resp = h.review(ctx, svc, old)
	}
	resp.UID = req.UID
	return resp
}

// scope decodes req and says whether it is out of scope (skip).
func (h *Handler) scope(req *admissionv1.AdmissionRequest) (svc, old *corev1.Service, skip bool, err error) {
	if req.Resource.Group != "" || req.Resource.Resource != "services" || req.SubResource != "" {
		return nil, nil, true, nil
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return nil, nil, true, nil
	}
	if h.exempt[req.UserInfo.Username] {
		return nil, nil, true, nil
	}
	svc = &corev1.Service{}
	if err := json.Unmarshal(req.Object.Raw, svc); err != nil {
		return nil, nil, false, fmt.Errorf("admission: decode Service: %w (not reviewed)", err)
	}
	if req.Operation == admissionv1.Update {
		old = &corev1.Service{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return nil, nil, false, fmt.Errorf("admission: decode the old Service: %w (not reviewed)", err)
		}
	}
	switch {
	case !h.managed(svc) && !h.managed(old):
		return nil, nil, true, nil
	case old != nil && !relevantChange(old, svc):
		return nil, nil, true, nil
	}
	return svc, old, false, nil
}

// managed reports whether the CCM manages svc's load balancer: Config.Serves, or without it
// type LoadBalancer without a loadBalancerClass. nil is not.
func (h *Handler) managed(svc *corev1.Service) bool {
	if svc == nil {
		return false
	}
	if h.cfg.Serves != nil {
		return h.cfg.Serves(svc)
	}
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil
}

// relevantChange reports whether cur differs from old in what the plan or the policy input
// reads: spec, labels, annotations other than requeue.Annotation.
func relevantChange(old, cur *corev1.Service) bool {
	if !apiequality.Semantic.DeepEqual(old.Spec, cur.Spec) || !maps.Equal(old.Labels, cur.Labels) {
		return true
	}
	a, b := maps.Clone(old.Annotations), maps.Clone(cur.Annotations)
	delete(a, requeue.Annotation)
	delete(b, requeue.Annotation)
	return !maps.Equal(a, b)
}

// review plans and decides a Service in scope.
func (h *Handler) review(ctx context.Context, svc, old *corev1.Service) *admissionv1.AdmissionResponse {
	if h.cfg.Synced != nil && !h.cfg.Synced() {
		return allowed([]string{WarningPrefix + "not reviewed: the webhook's caches of nodes and namespaces have not synced yet (the CCM decides when it reconciles)"})
	}
	subject := svc
	var plan lbplan.Plan
	var err error
	if h.managed(svc) {
		if svc.UID == "" { // the API server sets it before validating admission; be safe
			return allowed([]string{WarningPrefix + "the Service has no UID yet: not reviewed, the CCM decides when it reconciles"})
		}
		var nodes []*corev1.Node
		if nodes, err = h.nodes(); err == nil {
			plan, err = h.cfg.Planner.Preview(ctx, h.cfg.ClusterName, svc, nodes, h.deniedSteps(ctx, svc))
		}
	} else { // leaving type LoadBalancer: the CCM deletes the load balancer
		subject = old
		plan, err = h.cfg.Planner.PreviewDelete(ctx, h.cfg.ClusterName, old)
	}
	if err != nil {
		return allowed([]string{planWarning(err)})
	}
	if plan.Empty() {
		return allowed(nil)
	}
	return h.decide(ctx, subject, plan)
}

// nodes are the nodes the service controller passes to EnsureLoadBalancer.
func (h *Handler) nodes() ([]*corev1.Node, error) {
	if h.cfg.Nodes == nil {
		return nil, nil
	}
	all, err := h.cfg.Nodes()
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return LoadBalancerNodes(all), nil
}

// planWarning is the warning of a plan that failed.
func planWarning(err error) string {
	if annotation.IsUserError(err) {
		return truncate.String(WarningPrefix+"the CCM will refuse this Service until the annotation is fixed (event InvalidAnnotation): "+err.Error(), maxWarning)
	}
	return truncate.String(WarningPrefix+"could not plan the load balancer, not reviewed (the CCM decides when it reconciles): "+err.Error(), maxWarning)
}

// decide decides every step of plan for svc as the executor's gate does (gate.Gate.Decide).
func (h *Handler) decide(ctx context.Context, svc *corev1.Service, plan lbplan.Plan) *admissionv1.AdmissionResponse {
	plan = h.priced(plan)
	v := h.cfg.Gate.Decide(ctx, plan, svc)
	var denied, warnings, dryRun groups
	for _, st := range v.Steps {
		d := st.Decision
		warnings.add(st.Label, "", gate.DecisionWarnings(d))
		dryRun.add(st.Label, d.ID, d.NotEnforced())
		if !d.Allowed {
			denied.add(st.Label, d.ID, gate.DenyMessages(d))
		}
	}
	var out []string
	for _, w := range warnings.lines() {
		out = append(out, truncate.String(WarningPrefix+w, maxWarning))
	}
	for _, w := range dryRun.lines() {
		out = append(out, truncate.String(WarningPrefix+"would be denied (dry run): "+w, maxWarning))
	}
	if w := costWarning(v, plan.Pricing); w != "" {
		out = append(out, w)
	}
	if denied.steps == 0 {
		return allowed(out)
	}
	msg := fmt.Sprintf("%spolicy denied %d of %d changes to the Service's load balancer, nothing was stored: %s; %s",
		WarningPrefix, denied.steps, len(v.Steps), strings.Join(denied.lines(), "; "), stillRuns(v))
	klog.V(2).InfoS("Admission denied", "service", klog.KObj(svc), "message", msg)
	return &admissionv1.AdmissionResponse{
		Allowed:  false,
		Warnings: out,
		Result: &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusForbidden,
			Reason:  metav1.StatusReasonForbidden,
			Message: truncate.String(msg, truncate.EventMessage),
		},
	}
}

// stillRuns says which steps the CCM would still run if the Service were stored (steps fail
// alone, gate.Gate.Decide), so that the author sees what the denial holds back and what not.
func stillRuns(v gate.Verdict) string {
	if v.Run.Empty() {
		return "no other step would run"
	}
	labels := v.Run.Labels()
	const most = 5
	if len(labels) > most {
		return fmt.Sprintf("the other steps would still run: %s and %d more", strings.Join(labels[:most], ", "), len(labels)-most)
	}
	return "the other steps would still run: " + strings.Join(labels, ", ")
}

// deniedSteps is the lbgroup.DeniedSteps of svc: the steps the gate denies
// (gate.Gate.DeniedSteps), for the group planner (lbgroup.PlanGroup) to leave out the members
// the policy denies, as the CCM's sync does.
func (h *Handler) deniedSteps(ctx context.Context, svc *corev1.Service) lbgroup.DeniedSteps {
	return func(plan lbplan.Plan) []int { return h.cfg.Gate.DeniedSteps(ctx, h.priced(plan), svc) }
}

// priced is plan with the Pricing of Config.Pricing, unless it has one or there is none.
func (h *Handler) priced(plan lbplan.Plan) lbplan.Plan {
	if plan.Pricing == nil && h.cfg.Pricing != nil {
		plan.Pricing = h.cfg.Pricing()
	}
	return plan
}

// costWarning is the warning naming the monthly cost of the change v decided, from the price of
// the load balancer before its first step (input.cost.before) to after its last
// (input.cost.after): "monthly cost of this change: +5.00 EUR net (+5.95 gross); the load
// balancer then costs 5.00 EUR net (5.95 gross) a month". Only a change that creates, deletes
// or retypes a load balancer has one, and only with prices (p); a type and location the prices
// do not list make the cost "unknown".
func costWarning(v gate.Verdict, p *lbplan.Pricing) string {
	if p == nil || p.Prices.Empty() || len(v.Steps) == 0 || !slices.ContainsFunc(v.Steps, changesPrice) {
		return ""
	}
	first, last := v.Steps[0].Input, v.Steps[len(v.Steps)-1].Input
	if first.Cost == nil || last.Cost == nil {
		return ""
	}
	before, after := first.Current, last.LoadBalancer
	if first.Action == input.ActionLoadBalancerCreate {
		before = nil
	}
	if last.Action == input.ActionLoadBalancerDelete {
		after = nil
	}
	if !p.Prices.Knows(before) || !p.Prices.Knows(after) {
		return WarningPrefix + "monthly cost of this change: unknown (the load balancer types' price list has no price for its type and location)"
	}
	b, a := first.Cost.Before, last.Cost.After
	return fmt.Sprintf("%smonthly cost of this change: %+.2f %s net (%+.2f gross); the load balancer then costs %.2f %s net (%.2f gross) a month",
		WarningPrefix, a.MonthlyNet-b.MonthlyNet, last.Cost.Currency, a.MonthlyGross-b.MonthlyGross, a.MonthlyNet, last.Cost.Currency, a.MonthlyGross)
}

// changesPrice reports whether a step may change what the load balancer costs: a create, a
// delete, a change_type.
func changesPrice(s gate.StepVerdict) bool {
	return s.Input.Action == input.ActionLoadBalancerCreate || s.Input.Action == input.ActionLoadBalancerDelete || s.Input.Operation == lbplan.OpChangeType
}

// groups collects messages by text, keeping the order of first appearance, and the labels of
// the steps each came from, so a message every step repeats is one line.
type groups struct {
	order []string
	by    map[string]*group
	steps int // steps with at least one message
}

type group struct {
	labels []string
}

// add records the messages of the step label; id (a decision ID) is named with the label.
func (g *groups) add(label, id string, msgs []policy.Message) {
	if len(msgs) == 0 {
		return
	}
	g.steps++
	if g.by == nil {
		g.by = map[string]*group{}
	}
	if id != "" {
		label += " (decision " + id + ")"
	}
	for _, m := range msgs {
		text := m.Msg
		if m.Code != "" {
			text += " [" + m.Code + "]"
		}
		e, ok := g.by[text]
		if !ok {
			e = &group{}
			g.by[text] = e
			g.order = append(g.order, text)
		}
		if !slices.Contains(e.labels, label) {
			e.labels = append(e.labels, label)
		}
	}
}

// lines returns "labels: msg" per message: the steps (and decision IDs) first, so a cut
// message keeps them.
func (g *groups) lines() []string {
	out := make([]string, 0, len(g.order))
	for _, text := range g.order {
		out = append(out, strings.Join(g.by[text].labels, ", ")+": "+text)
	}
	return out
}

// allowed is an allowed response with warnings.
func allowed(warnings []string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: true, Warnings: warnings}
}

// ToBeDeletedTaint is the cluster autoscaler's taint on a node it is about to delete
// (k8s.io/cloud-provider/controllers/service.ToBeDeletedTaint).
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// LoadBalancerNodes returns the nodes of all that k8s.io/cloud-provider's service controller
// passes to EnsureLoadBalancer (its stableNodeSetPredicates, v0.37): not being deleted, not
// labelled node.kubernetes.io/exclude-from-external-load-balancers (unless the label's value
// parses as false), not tainted ToBeDeletedTaint. Only convention keeps the two in step;
// TestLoadBalancerNodes states the rules.
func LoadBalancerNodes(all []*corev1.Node) []*corev1.Node {
	out := make([]*corev1.Node, 0, len(all))
	for _, n := range all {
		if n == nil || !n.DeletionTimestamp.IsZero() || excluded(n) || slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == ToBeDeletedTaint }) {
			continue
		}
		out = append(out, n)
	}
	return out
}

// excluded is the service controller's nodeIncludedPredicate negated: the exclude label with a
// value that does not parse as false.
func excluded(n *corev1.Node) bool {
	v, ok := n.Labels[corev1.LabelNodeExcludeBalancers]
	if !ok {
		return false
	}
	switch v { // strconv.ParseBool's false values
	case "0", "f", "F", "false", "FALSE", "False":
		return false
	}
	return true
}

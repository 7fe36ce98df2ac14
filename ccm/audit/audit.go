// Package audit is the policy audit (docs/policy.md § Audit): it judges every load balancer and
// route the CCM manages as it exists now and reports the violations, never enforcing them.
//
// A load balancer is shown to the policy as the create that would build it today
// (loadbalancer.LoadBalancers.AuditPlans: the planner code of a real create), a route as its
// add_route (routes.Routes.AuditPlans); each decision's input has audit: true. Every deny
// message (whatever --policy-mode and the message's enforcement) is a violation with result
// "fail", every warning one with result "warn". The audit reports them as PolicyReport and
// ClusterPolicyReport objects (Reports), a Warning event PolicyViolation on the Service (or
// Node) when its set of violations changes, metrics and the decision log.
//
// An audit reads Hetzner through the CCM's caches (Audit); an audit after a change of a
// Service, namespace or node (Run's changed, debounced) plans from what the last one read and
// sends no request (AuditFromCaches, loadbalancer.AuditPlansFrom).
//
// The audit holds no executor: the load balancer plans come from the planner Preview uses,
// run silently (ccm/loadbalancer's notes.go), which never touches the executor
// (TestOnlyTheRunnersUseTheExecutor in ccm), and decisions send nothing (ccm/gate). The e2e tests
// TestCCMAuditReportsExistingLoadBalancers and TestCCMAuditGroupLimitLowered count 0 mutating
// requests.
package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/routeplan"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/truncate"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// DefaultInterval is the default of --policy-audit-interval.
const DefaultInterval = 10 * time.Minute

// ReasonPolicyViolation is the Warning event on a Service (a Node for a route) whose set of
// violations changed in an audit. It MUST not change: operators alert on it.
const ReasonPolicyViolation = "PolicyViolation"

// Results of a violation, as in a PolicyReport result.
const (
	ResultFail = "fail" // a deny message: enforcing would refuse the create
	ResultWarn = "warn" // a warning
)

// DefaultDebounce is the default of Options.Debounce.
const DefaultDebounce = 2 * time.Second

// LoadBalancerPlanner makes the creates that would build the existing load balancers today
// (*loadbalancer.LoadBalancers). With from nil it reads Hetzner and returns what it read; with
// from set it plans from those reads and sends no request (a Service they do not cover is a
// plan whose Err wraps loadbalancer.ErrNotRead).
type LoadBalancerPlanner interface {
	AuditPlansFrom(ctx context.Context, clusterName string, nodes []*corev1.Node, denied loadbalancer.StepDenier, from *loadbalancer.AuditReads) ([]loadbalancer.AuditPlan, *loadbalancer.AuditReads, error)
}

// RoutePlanner makes the add_route of every existing route (*routes.Routes).
type RoutePlanner interface {
	AuditPlans(ctx context.Context) ([]routeplan.Plan, error)
}

// Options configure [New]. Gate.Decider is required.
type Options struct {
	// LoadBalancers plans the load balancers; nil: none are judged.
	LoadBalancers LoadBalancerPlanner
	// Routes plans the routes; nil: none are judged.
	Routes RoutePlanner
	// Gate decides every step: the CCM's executor's (executor.Executor.Gate). The audit sets
	// its Audit field (input.audit true). Gate.Decider is required.
	Gate gate.Gate
	// ClusterName is --cluster-name.
	ClusterName string
	// Nodes returns the cluster's nodes (the node informer's cache); the audit keeps those the
	// service controller passes (admission.LoadBalancerNodes is applied by the caller). nil:
	// no nodes.
	Nodes func() ([]*corev1.Node, error)
	// Recorder receives the PolicyViolation events; nil drops them.
	Recorder record.EventRecorder
	// Reports writes the PolicyReports; nil writes none.
	Reports ReportWriter
	// Debounce is how long Run waits after the first change it is told of (Run's changed)
	// before it audits from the caches, so a burst of changes costs one audit; 0 means
	// DefaultDebounce.
	Debounce time.Duration
}

// Violation is one violated rule for one Service or route.
type Violation struct {
	// Service is the Service whose load balancer violates the rule; nil for a route.
	Service *corev1.Service
	// Node and Route name the route ("10.244.1.0/24 via 10.0.0.3") and its node; "" for a
	// load balancer.
	Node, Route string
	// Result is ResultFail or ResultWarn.
	Result string
	// Code is the message's code ("" when the rule gave none); Message its text.
	Code, Message string
	// Steps are the labels of the steps the message came from.
	Steps []string
}

// Rule is the policy and rule name of v in a report: its code, else "deny" or "warn".
func (v Violation) Rule() string {
	switch {
	case v.Code != "":
		return v.Code
	case v.Result == ResultFail:
		return "deny"
	}
	return "warn"
}

// Summary is the outcome of one audit.
type Summary struct {
	// Violations are sorted by subject, result, code and message, and merged (merge).
	Violations []Violation
	// LoadBalancers and Routes are how many were judged.
	LoadBalancers, Routes int
	// Failed counts the Services and routes that could not be planned (logged).
	Failed int
	// Carried counts the Services an audit from the caches could not plan from the last
	// reads (loadbalancer.ErrNotRead): their violations of the last audit are kept.
	Carried int
	// FromCaches is true for an audit from the caches (AuditFromCaches).
	FromCaches bool
	// Started and Duration time the audit.
	Started  time.Time
	Duration time.Duration
}

// Auditor runs audits. It is safe for concurrent use; audits run one at a time.
type Auditor struct {
	o   Options
	run sync.Mutex // one audit at a time

	mu sync.Mutex
	// seen is each subject's set of violations in the last audit (eventKey), for the
	// PolicyViolation event.
	seen map[string]string
	// crdMissing is logged once (Reports returned ErrNoPolicyReportAPI).
	crdMissing sync.Once

	// Guarded by run: what the last audit that read Hetzner read (read is true once one
	// ended), and the violations the last audit reported.
	read   bool
	reads  *loadbalancer.AuditReads
	routes []routeplan.Plan
	last   []Violation
}

// New returns an Auditor.
//
// # Errors
//
// A nil Decider.
func New(o Options) (*Auditor, error) {
	if o.Gate.Decider == nil {
		return nil, errors.New("audit.New: Options.Gate.Decider is required: pass the CCM's executor's gate")
	}
	o.Gate.Audit = true
	if o.Recorder == nil {
		o.Recorder = &record.FakeRecorder{}
	}
	if o.Debounce <= 0 {
		o.Debounce = DefaultDebounce
	}
	registerMetrics()
	return &Auditor{o: o, seen: map[string]string{}}, nil
}

// Audit judges every load balancer and route once and reports the violations (events,
// metrics, reports). It sends no mutating request. A Service or route that cannot be planned
// is logged and counted in Summary.Failed; the others are judged.
//
// # Errors
//
// A failed listing (Services, nodes, load balancers, routes), wrapped: nothing is reported
// then, so the reports, events and metrics of the last audit stay (a transient API error
// never makes a violation disappear). A failed report write, wrapped, after the events and
// metrics are reported.
func (a *Auditor) Audit(ctx context.Context) (Summary, error) {
	a.run.Lock()
	defer a.run.Unlock()
	return a.audit(ctx, false)
}

// AuditFromCaches is Audit without a request to Hetzner: the load balancers and routes are the
// ones the last Audit read (loadbalancer.AuditReads), the Services, namespace labels and nodes
// today's (the informers' caches), so a fixed Service, a labelled namespace or a changed node
// is judged anew. A Service those reads do not cover (created since, or asking for a
// certificate not read then) keeps its violations of the last audit (Summary.Carried) until the
// next Audit. Before the first Audit it is Audit.
//
// # Errors
//
// As Audit.
func (a *Auditor) AuditFromCaches(ctx context.Context) (Summary, error) {
	a.run.Lock()
	defer a.run.Unlock()
	return a.audit(ctx, a.read)
}

// audit is Audit (fromCaches false) or AuditFromCaches (true). a.run must be held.
func (a *Auditor) audit(ctx context.Context, fromCaches bool) (Summary, error) {
	s := Summary{Started: time.Now(), FromCaches: fromCaches}
	reads, routes, err := a.judge(ctx, &s, fromCaches)
	if err != nil {
		return s, err
	}
	a.read, a.reads, a.routes = true, reads, routes
	var errs []error
	s.Violations = merge(sortViolations(s.Violations))
	a.last = s.Violations
	s.Duration = time.Since(s.Started)
	a.events(s.Violations)
	observe(s)
	if a.o.Reports != nil {
		if err := a.o.Reports.Write(ctx, s.Violations); err != nil {
			if errors.Is(err, ErrNoPolicyReportAPI) {
				a.crdMissing.Do(func() {
					klog.InfoS("PolicyReports are not written: the API server does not serve them (install the CRDs with the chart value policyReports.enabled=true, and allow the CCM to manage policyreports and clusterpolicyreports); the audit reports by events, metrics and the decision log", "err", err)
				})
			} else {
				errs = append(errs, err)
			}
		}
	}
	return s, errors.Join(errs...)
}

// judge adds the violations of every load balancer and route to s: from the caches (the last
// reads, a.reads and a.routes) or read from Hetzner. It returns the reads and routes it
// planned from. a.run must be held.
func (a *Auditor) judge(ctx context.Context, s *Summary, fromCaches bool) (*loadbalancer.AuditReads, []routeplan.Plan, error) {
	var reads *loadbalancer.AuditReads
	var routes []routeplan.Plan
	if fromCaches {
		reads, routes = a.reads, a.routes
	}
	reads, lbErr := a.judgeLoadBalancers(ctx, s, reads)
	routes, routeErr := a.judgeRoutes(ctx, s, routes, fromCaches)
	return reads, routes, errors.Join(lbErr, routeErr)
}

// judgeLoadBalancers adds the violations of every load balancer to s, planned from reads (nil:
// read from Hetzner), and returns the reads it planned from.
func (a *Auditor) judgeLoadBalancers(ctx context.Context, s *Summary, reads *loadbalancer.AuditReads) (*loadbalancer.AuditReads, error) {
	if a.o.LoadBalancers == nil {
		return nil, nil
	}
	var nodes []*corev1.Node
	if a.o.Nodes != nil {
		var err error
		if nodes, err = a.o.Nodes(); err != nil {
			return nil, fmt.Errorf("audit: list nodes: %w", err)
		}
	}
	plans, reads, err := a.o.LoadBalancers.AuditPlansFrom(ctx, a.o.ClusterName, nodes, a.deniedSteps, reads)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	for _, p := range plans {
		if errors.Is(p.Err, loadbalancer.ErrNotRead) {
			s.Carried++
			s.Violations = append(s.Violations, a.lastOf(p.Service)...)
			continue
		}
		if p.Err != nil {
			s.Failed++
			klog.InfoS("Policy audit could not plan the load balancer of a Service; judged again at the next audit", "service", klog.KObj(p.Service), "err", p.Err)
			continue
		}
		s.LoadBalancers++
		for _, d := range a.decideLoadBalancer(ctx, p.Service, p.Plan) {
			s.Violations = append(s.Violations, violations(d, Violation{Service: p.Service})...)
		}
	}
	return reads, nil
}

// lastOf returns the violations the last audit reported for svc, each with svc as it is now.
func (a *Auditor) lastOf(svc *corev1.Service) []Violation {
	key := subjectKey(Violation{Service: svc})
	var out []Violation
	for _, v := range a.last {
		if subjectKey(v) == key {
			v.Service = svc
			out = append(out, v)
		}
	}
	return out
}

// judgeRoutes adds the violations of every route to s: of plans (the last read) when
// fromCaches, else of the routes read now. It returns the plans it judged.
func (a *Auditor) judgeRoutes(ctx context.Context, s *Summary, plans []routeplan.Plan, fromCaches bool) ([]routeplan.Plan, error) {
	if a.o.Routes == nil {
		return nil, nil
	}
	if !fromCaches {
		var err error
		if plans, err = a.o.Routes.AuditPlans(ctx); err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
	}
	for _, p := range plans {
		s.Routes++
		for _, st := range gate.RouteInputs(p, a.o.Gate.Cluster) {
			d := decided{label: st.Label, Decision: a.o.Gate.DecideInput(ctx, st.Input)}
			route := st.Input.Route.Destination + " via " + st.Input.Route.Gateway
			s.Violations = append(s.Violations, violations(d, Violation{Node: p.Node, Route: route})...)
		}
	}
	return plans, nil
}

// decided is one step's decision with its label.
type decided struct {
	label string
	policy.Decision
}

// decideLoadBalancer decides every step of plan for svc as the gate would, once, with
// input.audit true (gate.Gate.Decisions).
func (a *Auditor) decideLoadBalancer(ctx context.Context, svc *corev1.Service, plan lbplan.Plan) []decided {
	steps := a.o.Gate.Decisions(ctx, plan, svc)
	out := make([]decided, len(steps))
	for i, st := range steps {
		out[i] = decided{label: st.Label, Decision: st.Decision}
	}
	return out
}

// deniedSteps is the audit's loadbalancer.StepDenier: the steps enforcing would deny.
func (a *Auditor) deniedSteps(ctx context.Context, svc *corev1.Service, plan lbplan.Plan) []int {
	var out []int
	for i, d := range a.decideLoadBalancer(ctx, svc, plan) {
		if len(denials(d.Decision)) > 0 {
			out = append(out, i)
		}
	}
	return out
}

// denials are the messages of d that enforcing would refuse on: every deny message (enforced
// or not), and an evaluation failure the failure mode does not allow.
func denials(d policy.Decision) []policy.Message {
	out := slices.Clone(d.Deny)
	if d.Err != nil && (!d.Allowed || d.DryRun) {
		out = append(out, policy.Message{Msg: policy.EvaluationFailedPrefix + d.Err.Error()})
	}
	return out
}

// violations are the violations of decision d for the subject base.
func violations(d decided, base Violation) []Violation {
	var out []Violation
	add := func(result string, msgs []policy.Message) {
		for _, m := range msgs {
			v := base
			v.Result, v.Code, v.Message, v.Steps = result, m.Code, m.Msg, []string{d.label}
			out = append(out, v)
		}
	}
	add(ResultFail, denials(d.Decision))
	add(ResultWarn, gate.DecisionWarnings(d.Decision))
	return out
}

// sortViolations sorts vs by subject, result, code and message.
func sortViolations(vs []Violation) []Violation {
	slices.SortStableFunc(vs, func(x, y Violation) int { return strings.Compare(sortKey(x), sortKey(y)) })
	return vs
}

// subjectKey names the subject of v: "service/<ns>/<name>" or "route/<node>/<route>".
func subjectKey(v Violation) string {
	if v.Service != nil {
		return "service/" + v.Service.Namespace + "/" + v.Service.Name
	}
	return "route/" + v.Node + "/" + v.Route
}

func sortKey(v Violation) string {
	return subjectKey(v) + "\x00" + v.Result + "\x00" + v.Code + "\x00" + v.Message
}

// merge returns vs (sorted) with the violations of one subject that have the same result, code
// and message merged into one, listing every step.
func merge(vs []Violation) []Violation {
	var out []Violation
	for _, v := range vs {
		if n := len(out); n > 0 && sortKey(out[n-1]) == sortKey(v) {
			if !slices.Contains(out[n-1].Steps, v.Steps[0]) {
				out[n-1].Steps = append(out[n-1].Steps, v.Steps...)
			}
			continue
		}
		v.Steps = slices.Clone(v.Steps)
		out = append(out, v)
	}
	return out
}

// events puts a Warning event PolicyViolation on each subject whose set of violations changed
// since the last audit (a new subject with violations included); a subject whose violations
// are gone is forgotten without an event. An unchanged set gives no event, however many audits
// run.
func (a *Auditor) events(vs []Violation) {
	now := map[string][]Violation{}
	for _, v := range vs {
		now[subjectKey(v)] = append(now[subjectKey(v)], v)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, list := range now {
		text := eventMessage(list)
		if a.seen[key] == text {
			continue
		}
		a.seen[key] = text
		a.o.Recorder.Event(eventObject(list[0]), corev1.EventTypeWarning, ReasonPolicyViolation, text)
	}
	for key := range a.seen {
		if _, ok := now[key]; !ok {
			delete(a.seen, key)
		}
	}
}

// eventMessage lists the violations of one subject.
func eventMessage(list []Violation) string {
	parts := make([]string, 0, len(list))
	for _, v := range list {
		parts = append(parts, fmt.Sprintf("%s %s: %s", v.Result, v.Rule(), v.Message))
	}
	what := "the load balancer as it exists"
	if list[0].Service == nil {
		what = "route " + list[0].Route
	}
	return truncate.String("policy audit: "+what+" violates the policy (reported, not enforced): "+strings.Join(parts, "; "), truncate.EventMessage)
}

// eventObject is the object the event of v sits on: its Service, or the route's Node.
func eventObject(v Violation) runtime.Object {
	if v.Service != nil {
		return v.Service
	}
	return &corev1.ObjectReference{Kind: "Node", Name: v.Node, UID: types.UID(v.Node)}
}

// Run audits (Audit, reading Hetzner) at once, when trigger fires (a policy revision) and every
// interval after the last such audit; and from the caches (AuditFromCaches, no request) once
// Options.Debounce has passed since changed first fired (a Service, namespace or node changed),
// so a burst of changes is one audit within Debounce and an audit reading Hetzner that comes
// first covers it. interval 0 or less disables the audit (Run returns at once). synced must
// report true before the first audit (the informers of Services and nodes; a standby's never
// start, so it never audits). A failed audit is logged and tried again at the next. It
// blocks: run it in a goroutine.
func (a *Auditor) Run(ctx context.Context, synced func() bool, trigger, changed <-chan struct{}, interval time.Duration) {
	if interval <= 0 {
		return
	}
	for !synced() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	drain(trigger) // the first audit covers the revisions put in force so far
	drain(changed) // and the changes so far
	next := time.NewTimer(0)
	defer next.Stop()
	var settled <-chan time.Time // set while changes wait for their audit
	for {
		select {
		case <-ctx.Done():
			return
		case <-trigger:
		case <-next.C:
		case <-changed:
			if settled == nil {
				settled = time.After(a.o.Debounce)
			}
			continue
		case <-settled:
			settled = nil
			a.logged(a.AuditFromCaches(ctx))
			continue
		}
		settled = nil // the audit below covers the changes
		a.logged(a.Audit(ctx))
		next.Reset(interval)
	}
}

// drain empties a signal channel of capacity 1 (nil: nothing).
func drain(c <-chan struct{}) {
	select {
	case <-c:
	default:
	}
}

// logged logs the outcome of one audit.
func (a *Auditor) logged(s Summary, err error) {
	if err != nil {
		klog.ErrorS(err, "Policy audit failed; tried again at the next audit", "fromCaches", s.FromCaches)
		return
	}
	klog.InfoS("Policy audit done", "loadBalancers", s.LoadBalancers, "routes", s.Routes, "violations", len(s.Violations),
		"failed", s.Failed, "carried", s.Carried, "fromCaches", s.FromCaches, "duration", s.Duration)
}

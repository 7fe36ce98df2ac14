package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// The policy audit (ccm/audit, docs/policy.md § Audit) judges every existing load balancer as
// the create that would build it today. AuditPlans makes those creates with the code of a real
// reconcile (plan, planWith, planGroup with lbgroup.PlanGroup): the audit's copy of LoadBalancers (audit) differs from
// Preview's only in that its plans start from no load balancer (basis) and that a group's
// "leave out a member the policy refuses" step asks the audit's StepDenier ("would deny",
// whatever the mode) instead of the executor's gate. TestAuditPlans_EqualsCreate holds the
// audit input of an existing load balancer equal to the create input of a fresh Service.

// StepDenier returns the indices, in plan.Steps() order, of the steps of plan the policy would
// deny for svc.
type StepDenier func(ctx context.Context, svc *corev1.Service, plan lbplan.Plan) []int

// AuditPlan is one Service's load balancer as the audit shows it to the policy.
type AuditPlan struct {
	// Service is the Service (for a member of a load balancer group, the acting member).
	Service *corev1.Service
	// Plan is the create that would build the load balancer today (Plan.Group set for a
	// member of a group); empty when Err is set.
	Plan lbplan.Plan
	// Err is set when the Service's load balancer could not be planned (a bad annotation, a
	// failed read); the audit logs it and judges the others.
	Err error
}

// AuditPlans returns, for every Service the CCM serves (Serves: no loadBalancerClass unless
// --load-balancer-class-only, or the class served; not being deleted) whose load balancer exists, the create that would build that load balancer today
// for the nodes given (the nodes the service controller passes: admission.LoadBalancerNodes),
// ordered by namespace/name. denied is the StepDenier a group's plan leaves refused members out
// with, as a sync does with the gate.
//
// It never writes and records no event (it plans silently: notes.go). Its reads are the caches':
// each Service's load balancer through lbcache.Cache.Get (one list of every load balancer,
// ⌈n/50⌉ requests, when the cache is older than its max age), the groups' with one
// lbcache.Cache.ListGroups (⌈groups/50⌉ requests, only when a Service has the group
// annotation), servers through the server cache and types through the type cache. Certificates
// named by name in load-balancer.hetzner.cloud/http-certificates, and managed certificates, are
// looked up as a sync does (one request each).
//
// # Errors
//
// Without a Service lister, or when the group list fails; a Service that cannot be planned is
// an AuditPlan with Err.
func (l *LoadBalancers) AuditPlans(ctx context.Context, clusterName string, nodes []*corev1.Node, denied StepDenier) ([]AuditPlan, error) {
	plans, _, err := l.AuditPlansFrom(ctx, clusterName, nodes, denied, nil)
	return plans, err
}

// AuditReads are the Hetzner answers the planning of one audit read (each read named by its key,
// reads.go) and the groups that had a load balancer then. Opaque; never modified once returned.
type AuditReads struct {
	answers map[string]any
	groups  map[string]bool
}

// ErrNotRead is wrapped in an AuditPlan's Err when AuditPlansFrom, planning from earlier
// reads, needed a read those did not make (a Service whose load balancer or certificate was
// not read then): that Service is planned by the next audit that reads Hetzner.
var ErrNotRead = errors.New("the last audit that read Hetzner did not read what this plan needs")

// AuditPlansFrom is AuditPlans that also returns what its planning read. With from nil it
// reads as AuditPlans does and records those reads; with from set (the reads of an earlier
// AuditPlansFrom) it sends no request to Hetzner: every read is answered from from (the
// Services, nodes and namespace labels are today's, from the informers), and a Service whose
// plan needs a read from does not hold is an AuditPlan whose Err wraps ErrNotRead. The reads
// returned are from itself (from nil) or from (from set).
//
// # Errors
//
// As AuditPlans.
func (l *LoadBalancers) AuditPlansFrom(ctx context.Context, clusterName string, nodes []*corev1.Node, denied StepDenier, from *AuditReads) ([]AuditPlan, *AuditReads, error) {
	if l.services == nil {
		return nil, nil, errors.New("audit load balancers: this CCM runs without the Service informer (loadbalancer.Options.Services)")
	}
	all, err := l.services.List(labels.Everything())
	if err != nil {
		return nil, nil, fmt.Errorf("audit load balancers: list Services: %w", err)
	}
	ctx = silently(ctx) // the audit reports violations, not the events of a sync
	a := l
	svcs := managedServices(all, l.Serves)
	reads := from
	var rec *readRecord
	if from == nil {
		groups, err := a.existingGroups(ctx, clusterName, svcs)
		if err != nil {
			return nil, nil, err
		}
		ctx, rec = recordReads(ctx)
		reads = &AuditReads{groups: groups}
	} else {
		ctx = replayAuditReads(ctx, from.answers)
	}
	out := make([]AuditPlan, 0, len(svcs))
	for _, svc := range svcs {
		plan, ok, err := a.auditPlan(ctx, clusterName, svc, nodes, reads.groups, denied)
		switch {
		case errors.Is(err, errNotRecorded):
			out = append(out, AuditPlan{Service: svc, Err: fmt.Errorf("audit load balancers: %w: %w", ErrNotRead, err)})
		case err != nil:
			out = append(out, AuditPlan{Service: svc, Err: err})
		case ok:
			plan.Pricing = l.auditPricing(svc, plan)
			out = append(out, AuditPlan{Service: svc, Plan: plan})
		}
	}
	if rec != nil {
		reads.answers = rec.recorded()
	}
	return out, reads, nil
}

// auditPlan is AuditPlans for one Service: ok is false when it has no load balancer.
func (l *LoadBalancers) auditPlan(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node, groups map[string]bool, denied StepDenier) (lbplan.Plan, bool, error) {
	s, err := l.subjectOf(ctx, clusterName, svc)
	if err != nil {
		return lbplan.Plan{}, false, err
	}
	s = s.forAudit()
	exists, err := l.auditExists(ctx, s, groups)
	if err != nil || !exists {
		return lbplan.Plan{}, false, err
	}
	if s.groupName() != "" {
		served, err := l.auditServed(ctx, s)
		if err != nil || !served {
			return lbplan.Plan{}, false, err
		}
	}
	// The plan the sync of svc would decide: for a group with the gate (members the policy
	// refuses, other than svc, are left out as the sync leaves them out).
	p, err := l.plan(ctx, s.named(ctx, l), nodes, false, func(plan lbplan.Plan) []int { return denied(ctx, svc, plan) })
	if err != nil {
		return lbplan.Plan{}, false, err
	}
	if p.plan == nil {
		return lbplan.Plan{}, s.groupName() != "", nil
	}
	return *p.plan, true, nil
}

// auditExists reports whether s has a load balancer: a group's is in groups (one list of them
// all), a Service's own is read through the cache.
func (l *LoadBalancers) auditExists(ctx context.Context, s subject, groups map[string]bool) (bool, error) {
	if g := s.groupName(); g != "" {
		return groups[g], nil
	}
	lb, _, err := l.labelled(ctx, s, true)
	return lb != nil, err
}

// auditServed reports whether the group's load balancer serves the member s: it has a listener
// of one of its ports (listen port and node port). A member with none (the gate refused its
// listeners, or a port conflict or the capacity left it out) has nothing that exists to audit:
// its sync's events (PolicyDenied) report it, the audit does not report it a second time.
func (l *LoadBalancers) auditServed(ctx context.Context, s subject) (bool, error) {
	lb, _, err := l.labelled(ctx, s, true)
	if err != nil || lb == nil {
		return false, err
	}
	for _, p := range s.acting().Spec.Ports {
		if slices.ContainsFunc(lb.Services, func(x lbplan.Listener) bool {
			return x.ListenPort == int(p.Port) && x.DestinationPort == int(p.NodePort)
		}) {
			return true, nil
		}
	}
	return false, nil
}

// existingGroups returns the load balancer groups of cluster that have a load balancer, listing
// them once (lbcache.Cache.ListGroups, which also refreshes the entries planGroup reads) when
// one of svcs has the group annotation; nil otherwise.
func (l *LoadBalancers) existingGroups(ctx context.Context, clusterName string, svcs []*corev1.Service) (map[string]bool, error) {
	if !slices.ContainsFunc(svcs, func(svc *corev1.Service) bool {
		s, err := l.subjectOf(ctx, clusterName, svc)
		return err == nil && s.groupName() != ""
	}) {
		return nil, nil
	}
	lbs, _, err := l.cache.ListGroups(ctx, clusterName)
	if err != nil {
		return nil, fmt.Errorf("audit load balancers: list the load balancers of groups: %w", err)
	}
	out := map[string]bool{}
	for _, lb := range lbs {
		out[lb.Labels[lbplan.LabelGroup]] = true
	}
	return out, nil
}

// managedServices returns the Services of all that the CCM serves (serves) and that are not
// being deleted, by namespace/name.
func managedServices(all []*corev1.Service, serves func(*corev1.Service) bool) []*corev1.Service {
	out := make([]*corev1.Service, 0, len(all))
	for _, s := range all {
		if s == nil || !serves(s) || s.DeletionTimestamp != nil {
			continue
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *corev1.Service) int { return strings.Compare(lbplan.Key(a), lbplan.Key(b)) })
	return out
}

// deniedSteps is the gate's DeniedSteps (of the plan priced as the executor's run is).
// The executor's answers are reads of a call like any other (reads.go), named by the plan's
// digest: a replay of a denied group sync gets them without a new decision. Without a digest
// (no policy revision, unreadable namespace labels) they are not recorded.
func (l *LoadBalancers) deniedSteps(ctx context.Context, svc *corev1.Service, plan lbplan.Plan) []int {
	plan = l.priced(plan)
	key := ""
	if digest := l.gate.Digest(plan, svc); digest != "" {
		key = "gate denials of the plan " + digest
	}
	denied, _ := read(ctx, key, func() ([]int, error) { return l.gate.DeniedSteps(ctx, plan, svc), nil })
	return denied
}

// auditPricing is the Pricing of the create the audit shows the load balancer of svc as: the
// inventory that load balancer (of svc, or of its group) met when it was created, the load
// balancers older than it (inventory.OlderThan, by Hetzner created time then ID), so a quota
// or a budget reports the load balancers over it, not every one; nil when no policy in force
// reads it (as the gate's: gate.Gate.ReadsInventory).
func (l *LoadBalancers) auditPricing(svc *corev1.Service, plan lbplan.Plan) *lbplan.Pricing {
	if !l.gate.ReadsInventory() {
		return nil
	}
	p := l.Pricing()
	owner := input.Owner{Kind: inventory.OwnerService, Namespace: svc.Namespace, Name: svc.Name}
	if g := plan.Group; g != nil {
		owner = input.Owner{Kind: inventory.OwnerGroup, Namespace: g.Namespace, Name: g.Name}
	}
	p.Inventory = inventory.OlderThan(p.Inventory, owner, l.createdTimes(), p.Prices)
	return p
}

// createdTimes returns the created time of every load balancer the cache holds, by ID.
func (l *LoadBalancers) createdTimes() map[int64]time.Time {
	lbs, _ := l.cache.All()
	out := make(map[int64]time.Time, len(lbs))
	for _, a := range lbs {
		out[a.ID] = a.Created
	}
	return out
}

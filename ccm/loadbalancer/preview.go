package loadbalancer

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbgroup"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// Preview returns the plan EnsureLoadBalancer would decide and run for svc with nodes, without
// running it (for a member of a load balancer group: the group's plan, with input.group): the same name (annotation, naming plugin, default), the same reads of the API
// (the load balancer by UID label and by name, certificates, the type list from its cache) and
// the same planning code (reconcile and Preview share plan). It is what the admission webhook
// (ccm/admission) evaluates.
//
// For a member of a group, denied (nil: none) decides the steps as lbgroup.PlanGroup asks for
// them: with it, members the policy denies only for their own listeners are left out as the
// CCM's sync leaves them out, so the webhook shows the CCM's verdict. Without a group it is
// unused.
//
// With a policy in force the plan carries the Pricing the gate would decide it with
// (priced). Preview never writes to Hetzner: it has no executor (TestPreview_NoWrite), records no event
// and leaves the remembered denials and the denial tracker alone, so a Service that is only
// being admitted (and may never exist) leaves no trace on the CCM's state. svc and nodes are
// read, never modified.
//
// # Errors
//
// The errors of EnsureLoadBalancer before its first write: bad annotations
// (annotation.IsUserError), a *NameConflictError, failed reads.
func (l *LoadBalancers) Preview(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node, denied lbgroup.DeniedSteps) (lbplan.Plan, error) {
	ctx = silently(ctx)
	s, err := l.subjectOf(ctx, clusterName, svc)
	if err != nil {
		return lbplan.Plan{}, err
	}
	p, err := l.plan(ctx, s.named(ctx, l), nodes, true, denied)
	if err != nil || p.plan == nil {
		return lbplan.Plan{}, err
	}
	return l.priced(*p.plan), nil
}

// priced is plan with the Pricing the gate decides it with (lbplan.Plan.Pricing: the inventory
// and the prices of the caches), so the inputs carry input.inventory and input.cost; plan as it
// is when it has a Pricing, when no policy in force reads them (gate.Gate.ReadsInventory) and
// for an empty plan. Every plan the executor runs is priced here, at the call (l.exec.Run(ctx,
// svc, l.priced(plan)): a wrapper would add a frame between EnsureLoadBalancer and the HTTP
// client; TestEveryRunIsPriced checks each call), and so is the webhook's (Preview): the gate
// calls back into no one.
func (l *LoadBalancers) priced(plan lbplan.Plan) lbplan.Plan {
	if plan.Empty() || plan.Pricing != nil || l.gate.Decider == nil || !l.gate.ReadsInventory() {
		return plan
	}
	plan.Pricing = l.Pricing()
	return plan
}

// PreviewDelete returns the plan EnsureLoadBalancerDeleted would decide and run for svc (the
// delete of the load balancer carrying its UID label; for a member of a load balancer group,
// the removal of its listeners from the group's load balancer, or its delete with the last
// member), without running it: an empty plan when there is none or it has delete protection
// (the CCM keeps it then). Like Preview it never writes and records no event.
func (l *LoadBalancers) PreviewDelete(ctx context.Context, clusterName string, svc *corev1.Service) (lbplan.Plan, error) {
	plan, err := l.deletedSubject(clusterName, svc).previewDelete(silently(ctx), l)
	return l.priced(plan), err
}

// previewDeleteOwn is PreviewDelete of the load balancer of a Service of its own.
func (l *LoadBalancers) previewDeleteOwn(ctx context.Context, s ownSubject) (lbplan.Plan, error) {
	lb, _, err := l.labelled(ctx, s, false)
	if err != nil || lb == nil {
		return lbplan.Plan{}, err
	}
	plan, err := lbplan.ComputeDelete(lb)
	if err != nil { // *lbplan.ProtectedError: kept, nothing to decide
		return lbplan.Plan{}, nil //nolint:nilerr // a protected load balancer is kept, as EnsureLoadBalancerDeleted does
	}
	return plan, nil
}

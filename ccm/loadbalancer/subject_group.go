package loadbalancer

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbgroup"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
)

// groupSubject is the shared load balancer of a load balancer group, found by the group's and
// the cluster's labels, for the acting member svc (nil only for the sweep of a group without
// members).
type groupSubject struct {
	svc     *corev1.Service
	cluster string
	group   string
	// audit: the plan starts from no load balancer (lbgroup.Shell.FromScratch).
	audit bool
}

var _ subject = groupSubject{}

func (s groupSubject) acting() *corev1.Service                       { return s.svc }
func (s groupSubject) groupName() string                             { return s.group }
func (s groupSubject) named(context.Context, *LoadBalancers) subject { return s }

func (s groupSubject) forAudit() subject {
	s.audit = true
	return s
}

func (s groupSubject) lookup(l *LoadBalancers, cached bool) (key, what string, list func(context.Context) ([]*lbplan.Actual, time.Time, error)) {
	get := l.cache.ReadGroup
	if cached {
		get = l.cache.GetGroup
	}
	return "load balancers of group " + s.group + " in cluster " + s.cluster + cachedSuffix(cached),
		lbgroup.GroupSelector(s.group, s.cluster) + ": more than one load balancer carries the group's labels",
		func(ctx context.Context) ([]*lbplan.Actual, time.Time, error) { return get(ctx, s.group, s.cluster) }
}

// adopts: a load balancer with the group's labels.
func (s groupSubject) adopts(labels map[string]string) bool {
	return labels[lbplan.LabelGroup] == s.group && labels[lbplan.LabelCluster] == s.cluster
}

func (s groupSubject) plan(ctx context.Context, l *LoadBalancers, nodes []*corev1.Node, create bool, denied lbgroup.DeniedSteps) (planned, error) {
	return l.planGroup(ctx, s, nodes, create, denied)
}

func (s groupSubject) beforeRun(ctx context.Context, l *LoadBalancers, p planned, create bool) error {
	return l.groupBeforeRun(ctx, s, p, create)
}

func (s groupSubject) afterRun(ctx context.Context, l *LoadBalancers, p planned, create bool) error {
	return l.groupAfterRun(ctx, s, p, create)
}

func (groupSubject) watch(context.Context, *LoadBalancers, bool, *lbplan.Actual, error) {}

// lock: the group (lockGroup).
func (s groupSubject) lock(l *LoadBalancers) func() { return l.lockGroup(s.group) }

// settle: every member's detached run.
func (s groupSubject) settle(ctx context.Context, l *LoadBalancers) error {
	members, err := l.members(s.svc, s.group, true)
	if err != nil {
		return err
	}
	return l.settleGroup(ctx, members...)
}

func (s groupSubject) keep(l *LoadBalancers, lb *lbplan.Actual, readAt time.Time) {
	l.cache.PutGroup(s.group, s.cluster, lb, readAt)
}

func (s groupSubject) forget(l *LoadBalancers) { l.cache.ForgetGroup(s.group, s.cluster) }

func (s groupSubject) converged(l *LoadBalancers, state *lbplan.Actual) {
	l.groupsConverged.set(s.group, state, time.Now())
}

// statusOptions: the group's leader's (its load balancer's settings), with the acting member's
// proxy protocol (withOwnProxyProtocol).
func (s groupSubject) statusOptions(_ context.Context, l *LoadBalancers, lb *lbplan.Actual) (lbplan.StatusOptions, error) {
	members, err := l.members(s.svc, s.group, true)
	if err != nil {
		return lbplan.StatusOptions{}, err
	}
	leader := s.svc
	if len(members) > 0 {
		leader = lbgroup.GroupLeader(members, l.groupHome(s.group, lb, members))
	}
	opts, err := lbservice.NewStatusOptions(leader, l.cfg)
	if err != nil {
		return opts, err
	}
	return l.withOwnProxyProtocol(opts, s.svc), nil
}

func (s groupSubject) delete(ctx context.Context, l *LoadBalancers) error {
	return l.leaveGroupOnce(ctx, s)
}

func (s groupSubject) previewDelete(ctx context.Context, l *LoadBalancers) (lbplan.Plan, error) {
	return l.previewLeave(ctx, s)
}

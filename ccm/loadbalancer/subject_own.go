package loadbalancer

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbgroup"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
)

// ownSubject is the load balancer of one Service, found by the UID label of its Service.
type ownSubject struct {
	svc     *corev1.Service
	cluster string
	// name and rename are the name of its load balancer (l.name: annotation, naming plugin,
	// default), set by named.
	name   string
	rename bool
	// audit: the plan starts from no load balancer (basis).
	audit bool
}

var _ subject = ownSubject{}

func (s ownSubject) acting() *corev1.Service { return s.svc }
func (s ownSubject) groupName() string       { return "" }

func (s ownSubject) named(ctx context.Context, l *LoadBalancers) subject {
	s.name, s.rename = l.name(ctx, s.cluster, s.svc)
	return s
}

func (s ownSubject) forAudit() subject {
	s.audit = true
	return s
}

// basis is the load balancer the plan starts from: lb, or none (a create) for the audit.
func (s ownSubject) basis(lb *lbplan.Actual) *lbplan.Actual {
	if s.audit {
		return nil
	}
	return lb
}

func (s ownSubject) lookup(l *LoadBalancers, cached bool) (key, what string, list func(context.Context) ([]*lbplan.Actual, time.Time, error)) {
	get := l.cache.Read
	if cached {
		get = l.cache.Get
	}
	uid := string(s.svc.UID)
	return "load balancers of Service " + uid + cachedSuffix(cached), lbplan.LabelServiceUID + "=" + uid,
		func(ctx context.Context) ([]*lbplan.Actual, time.Time, error) { return get(ctx, uid) }
}

// adopts: a load balancer without a group label and without another Service's UID label.
func (s ownSubject) adopts(labels map[string]string) bool {
	uid := labels[lbplan.LabelServiceUID]
	return (uid == "" || uid == string(s.svc.UID)) && labels[lbplan.LabelGroup] == ""
}

func (s ownSubject) plan(ctx context.Context, l *LoadBalancers, nodes []*corev1.Node, create bool, _ lbgroup.DeniedSteps) (planned, error) {
	return l.planOwn(ctx, s, nodes, create)
}

func (ownSubject) beforeRun(context.Context, *LoadBalancers, planned, bool) error { return nil }
func (ownSubject) afterRun(context.Context, *LoadBalancers, planned, bool) error  { return nil }

func (s ownSubject) watch(ctx context.Context, l *LoadBalancers, create bool, state *lbplan.Actual, err error) {
	l.watchOwn(ctx, s.svc, create, state, err)
}

// lock: its Service by UID ("uid:" + UID, which no group name can be).
func (s ownSubject) lock(l *LoadBalancers) func() { return l.locks.lock("uid:" + string(s.svc.UID)) }

// settle: the Service's own detached run (detach.go).
func (s ownSubject) settle(ctx context.Context, l *LoadBalancers) error {
	return l.exec.Settle(ctx, s.svc.UID)
}

func (s ownSubject) keep(l *LoadBalancers, lb *lbplan.Actual, readAt time.Time) {
	l.cache.Put(string(s.svc.UID), lb, readAt)
}

func (s ownSubject) forget(l *LoadBalancers) { l.cache.Forget(string(s.svc.UID)) }

func (s ownSubject) converged(l *LoadBalancers, state *lbplan.Actual) {
	l.converged.set(s.svc, state, time.Now())
}

// statusOptions: the Service's own annotations; a bad one is an InvalidAnnotation.
func (s ownSubject) statusOptions(ctx context.Context, l *LoadBalancers, _ *lbplan.Actual) (lbplan.StatusOptions, error) {
	opts, err := lbservice.NewStatusOptions(s.svc, l.cfg)
	if err != nil {
		return opts, l.invalid(ctx, s.svc, err)
	}
	return opts, nil
}

func (s ownSubject) delete(ctx context.Context, l *LoadBalancers) error {
	return l.deleteOwnOnce(ctx, s)
}

func (s ownSubject) previewDelete(ctx context.Context, l *LoadBalancers) (lbplan.Plan, error) {
	return l.previewDeleteOwn(ctx, s)
}

// cachedSuffix names, in the key of a read, whether it went through the cache.
func cachedSuffix(cached bool) string {
	if cached {
		return " (cached true)"
	}
	return " (cached false)"
}

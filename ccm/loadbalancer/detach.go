package loadbalancer

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// ActionFailureTracker is implemented by a DenialTracker that also retries a Service whose
// detached update failed after UpdateLoadBalancer returned (ccm/requeue's Requeuer does).
type ActionFailureTracker interface {
	// ActionFailed records that the detached update of svc failed with err and retries svc.
	ActionFailed(svc *corev1.Service, err error)
}

// runDetached runs an Update's plan with executor.RunDetached (target changes return once the
// API accepted the first request; the action waits of a round share their polls) and keeps the
// returned state in the cache as of readAt. When the background part fails, the cached load
// balancer of svc is forgotten, after the state was kept and never before (the lock below), so
// the next call reads it again; and svc is retried through the DenialTracker when it is an
// ActionFailureTracker. TestUpdateLoadBalancer_detached tests both.
func (l *LoadBalancers) runDetached(ctx context.Context, svc *corev1.Service, plan lbplan.Plan, readAt time.Time) (*lbplan.Actual, error) {
	var kept sync.Mutex
	kept.Lock()
	state, err := l.exec.RunDetached(ctx, svc, plan, func(err error) {
		kept.Lock()
		defer kept.Unlock()
		l.cache.Forget(string(svc.UID))
		if t, ok := l.denials.(ActionFailureTracker); ok {
			t.ActionFailed(svc, err)
		}
	})
	l.stored(svc, state, readAt, err)
	kept.Unlock()
	return state, err
}

// runDetachedGroup is runDetached for a member svc of group: the returned state is kept as the
// group's cache entry, and a failed background part forgets that entry (after it was kept, as
// above) and retries svc.
func (l *LoadBalancers) runDetachedGroup(ctx context.Context, cluster, group string, svc *corev1.Service, plan lbplan.Plan, readAt time.Time) (*lbplan.Actual, error) {
	var kept sync.Mutex
	kept.Lock()
	state, err := l.exec.RunDetached(ctx, svc, plan, func(err error) {
		kept.Lock()
		defer kept.Unlock()
		l.cache.ForgetGroup(group, cluster)
		if t, ok := l.denials.(ActionFailureTracker); ok {
			t.ActionFailed(svc, err)
		}
	})
	l.storedGroup(group, cluster, state, readAt, err)
	kept.Unlock()
	return state, err
}

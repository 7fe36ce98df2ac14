package loadbalancer

import (
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// ActionFailureTracker is implemented by a DenialTracker that also retries a Service whose
// detached update failed after UpdateLoadBalancer returned (ccm/requeue's Requeuer does).
type ActionFailureTracker interface {
	// ActionFailed records that the detached update of svc failed with err and retries svc.
	ActionFailed(svc *corev1.Service, err error)
}

// ActionRetryTracker is implemented by an ActionFailureTracker that retries failed updates with
// backoff (ccm/requeue's Requeuer does): while the retry of a Service is scheduled, its calls
// send nothing, so a burst of failing actions costs the retries, not one sync per failure.
type ActionRetryTracker interface {
	// RetryScheduled returns when the scheduled retry of svc is due, and whether one is
	// scheduled and not yet due.
	RetryScheduled(svc *corev1.Service) (time.Time, bool)
	// SyncFailed records that an EnsureLoadBalancer of svc that was not denied failed with err.
	SyncFailed(svc *corev1.Service, err error)
	// Synced records that an EnsureLoadBalancer of svc succeeded.
	Synced(svc *corev1.Service)
}

// RetryScheduledError is returned by EnsureLoadBalancer, without a request, for a Service whose
// failed update is retried at Due (ActionRetryTracker): the service controller's own retry must
// not add a sync to the backoff's.
type RetryScheduledError struct{ Due time.Time }

func (e *RetryScheduledError) Error() string {
	return "ensure load balancer: a failed update is retried at " + e.Due.UTC().Format(time.RFC3339) + " (backoff): nothing sent before"
}

// retryScheduled returns a *RetryScheduledError when svc's failed update has a retry scheduled
// and not yet due, else nil.
func (l *LoadBalancers) retryScheduled(svc *corev1.Service) error {
	t, ok := l.denials.(ActionRetryTracker)
	if !ok {
		return nil
	}
	if due, ok := t.RetryScheduled(svc); ok {
		return &RetryScheduledError{Due: due}
	}
	return nil
}

// synced tells an ActionRetryTracker the result of an EnsureLoadBalancer of svc that was not
// denied.
func (l *LoadBalancers) synced(svc *corev1.Service, err error) {
	t, ok := l.denials.(ActionRetryTracker)
	switch {
	case !ok || errors.Is(err, policy.ErrDenied):
	case err == nil:
		t.Synced(svc)
	default:
		t.SyncFailed(svc, err)
	}
}

package executor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// ReasonUpdateLoadBalancerFailed is the Warning event of a detached run that failed after
// RunDetached returned: the reason the service controller gives a failed UpdateLoadBalancer,
// so alerts on it see both. It MUST not change.
const ReasonUpdateLoadBalancerFailed = "UpdateLoadBalancerFailed"

// DetachTimeout bounds the background part of a detached run (its action waits and later
// requests); a run that has not ended by then fails like any other.
const DetachTimeout = 5 * time.Minute

// detached tracks the runs whose background part has not ended, by Service UID. The zero value
// is ready to use.
type detached struct {
	mu   sync.Mutex
	runs map[types.UID]chan struct{}
}

// start registers a run of uid; the returned func ends it.
func (d *detached) start(uid types.UID) (end func()) {
	done := make(chan struct{})
	d.mu.Lock()
	if d.runs == nil {
		d.runs = map[types.UID]chan struct{}{}
	}
	d.runs[uid] = done
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		if d.runs[uid] == done {
			delete(d.runs, uid)
		}
		d.mu.Unlock()
		close(done)
	}
}

// running returns the done channel of uid's run; nil when none runs.
func (d *detached) running(uid types.UID) chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.runs[uid]
}

// Settle returns when no detached run of the Service uid is in flight (at once when none is):
// its failure callback has then run, so a plan made after Settle sees what that run left. The
// load balancer code calls it before it reads a Service's load balancer to plan; Run and
// RunDetached call it too, so no run of a Service overlaps the background part of its detached
// run (enforced here, tested by TestRunDetached). Two calls of one Service that plan and run at
// once are the caller's to serialise (ccm/loadbalancer's lockService and lockGroup, tested by
// TestConcurrentEnsureAndUpdate).
//
// # Errors
//
// The error of ctx when it ends first.
func (x *Executor) Settle(ctx context.Context, uid types.UID) error {
	for {
		done := x.detached.running(uid)
		if done == nil {
			return nil
		}
		x.actions.kick() // this call waits for the run's action: poll it soon
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the earlier run of Service %s: %w", uid, ctx.Err())
		}
	}
}

// Detachable reports whether RunDetached may return before the actions of plan end: every
// request changes a target (add_target, remove_target) of an existing load balancer. A target
// change is independent of the load balancer's other state and its Apply is exact, so the state
// RunDetached returns is what the API holds once the actions succeed.
func Detachable(plan lbplan.Plan) bool {
	if plan.Empty() || plan.Actual == nil {
		return false
	}
	for _, req := range plan.Requests() {
		if len(req.Inline) > 0 {
			return false
		}
		switch req.Mutation.Operation() {
		case lbplan.OpAddTarget, lbplan.OpRemoveTarget:
		default:
			return false
		}
	}
	return true
}

// RunDetached is Run for UpdateLoadBalancer (node sync): when the plan is Detachable it decides
// every request, sends the first one and returns once the API accepted it, with the state the
// load balancer has once every request succeeded. The rest runs in the background: the first
// action is awaited with the shared waiter, so the runs of a round (the service controller
// calls UpdateLoadBalancer for one Service after the other) share their polls, one
// GET /actions per 50 pending actions and round; each later request is sent when the one
// before it ended (a running action locks the load balancer: 423 locked), and an action that a
// later request waits for is polled within the first poll interval, not after the backoff of
// the round (actionWaiter.waitSoon). A plan that is not Detachable runs as Run does.
//
// When the background part fails (an action ended in error, a request failed, or DetachTimeout
// passed), it counts the failed mutation, puts a Warning event UpdateLoadBalancerFailed on svc
// naming the error and calls failed(err) before the run counts as ended (Settle): the caller
// forgets what it kept of the returned state and retries the Service. The Normal event naming
// the applied changes is emitted when the background part ends. The mutation metric counts a
// request's success when the API accepted it, and its error too when its action then failed.
// A later request that a declared outcome skips (a target beyond max_targets: Warning event
// MaxTargetsReached) is in the returned state but not in the API; a cache of that state holds
// the difference until its max age, when the next plan tries the target again.
//
// A plan with a denied step is not detached: the steps that run (Decide) run as Run runs them,
// and the denial is returned with what they left.
//
// # Errors
//
// As Run (a refusal too), for the decisions and the first request; nothing runs in the
// background then.
func (x *Executor) RunDetached(ctx context.Context, svc *corev1.Service, plan lbplan.Plan, failed func(error)) (*lbplan.Actual, error) {
	if !Detachable(plan) {
		return x.Run(ctx, svc, plan)
	}
	if err := vetKinds(plan.Mutations); err != nil {
		return nil, err
	}
	if err := x.Settle(ctx, svc.UID); err != nil {
		return nil, err
	}
	plan, denied := x.decidePlan(ctx, svc, plan)
	if denied != nil { // steps fail alone: the rest runs whole, and its event names both
		return x.Send(ctx, Decided{svc: svc, run: plan, denied: denied, made: true})
	}
	reqs := plan.Requests()
	r := newRun(svc, plan)
	var pending *hcloud.Action
	capture := func(_ context.Context, a *hcloud.Action) error { pending = a; return nil }
	if _, err := send(ctx, x, r, reqs[0], capture); err != nil {
		return nil, err
	}
	final := r.state
	for _, req := range reqs[1:] {
		for _, m := range req.Mutations() {
			final = m.Apply(final)
		}
	}
	end := x.detached.start(svc.UID)
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), DetachTimeout)
	go func() {
		defer end()
		defer cancel()
		err := x.background(bg, r, reqs, pending)
		x.reportApplied(svc, r.applied)
		if err == nil {
			return
		}
		klog.ErrorS(err, "Detached load balancer update failed; the Service is retried", "service", klog.KObj(svc), "loadBalancer", lbName(plan.Actual))
		x.recorder.Event(svc, corev1.EventTypeWarning, ReasonUpdateLoadBalancerFailed, fmt.Sprintf("Error updating load balancer %s: %v", lbName(plan.Actual), err))
		if failed != nil {
			failed(err)
		}
	}()
	return final, nil
}

// background is the part of a detached run after its first request: it awaits that request's
// action (pending, nil when the API answered without one) and sends the rest of reqs.
func (x *Executor) background(ctx context.Context, r *run, reqs []lbplan.Batch, pending *hcloud.Action) error {
	wait := x.waitShared // the first action shares the round's polls
	if len(reqs) > 1 {
		wait = x.waitNext // the next request waits for it
	}
	if pending != nil {
		if err := wait(ctx, pending); err != nil {
			for _, m := range reqs[0].Mutations() {
				countMutation(m.Action(), m.Operation(), resultError)
			}
			r.applied = nil // counted as applied when the API accepted it
			return wrapAPIError(reqs[0].Mutation, err)
		}
	}
	for i, req := range reqs[1:] {
		wait := x.waitShared
		if i+2 < len(reqs) {
			wait = x.waitNext
		}
		if _, err := send(ctx, x, r, req, wait); err != nil {
			return err
		}
	}
	return nil
}

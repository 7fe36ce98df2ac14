package ccm

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/admission"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/audit"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// auditTrigger returns the channel that starts an audit after a policy revision is put in
// force, and the function the policy engine calls then (chained after next, if not nil).
func auditTrigger(next func(string)) (chan struct{}, func(string)) {
	trigger := make(chan struct{}, 1)
	return trigger, func(revision string) {
		if next != nil {
			next(revision)
		}
		select {
		case trigger <- struct{}{}:
		default: // an audit is already due
		}
	}
}

// newAudit builds the policy audit (ccm/audit) when there is something to audit with: a policy
// engine, the informers and an interval above 0; nil otherwise. It judges the load balancers
// (unless HCLOUD_LOAD_BALANCERS_ENABLED=false) and the routes (when they run) with the planner,
// the cluster view, the namespace labels and the nodes the gate and the webhook use, and writes
// PolicyReports with d.Dynamic (none when nil). The function returned runs it until ctx ends;
// only the leader calls it (leaderLoops), and only then does it watch the Services, nodes and
// namespaces: a change the audit's inputs read (auditWatch) starts an audit from the caches
// after audit.DefaultDebounce, which sends no request to Hetzner. Without the right to list namespaces
// (namespacesForbidden) it starts no namespace informer either: the namespace labels are then
// evaluation errors, as for the gate.
func (c *Cloud) newAudit(d Deps) (func(ctx context.Context, trigger <-chan struct{}), error) {
	if _, ok := c.decider.(*policy.Engine); !ok || d.Informers == nil || d.Options.PolicyAuditInterval <= 0 {
		return nil, nil
	}
	nodes := d.Informers.Core().V1().Nodes()
	services := d.Informers.Core().V1().Services().Informer()
	nodeInformer, nodeLister := nodes.Informer(), nodes.Lister()
	namespacesSynced := func() bool { return true } // forbidden: no namespace informer runs
	if !c.namespacesForbidden {
		namespacesSynced = d.Informers.Core().V1().Namespaces().Informer().HasSynced
	}
	o := audit.Options{
		Gate: c.admission.exec.Gate(), ClusterName: d.ClusterName, Recorder: d.Recorder,
		Nodes: func() ([]*corev1.Node, error) {
			all, err := nodeLister.List(labels.Everything())
			return admission.LoadBalancerNodes(all), err
		},
	}
	if c.cfg.LoadBalancer.Enabled {
		o.LoadBalancers = c.lbs
	}
	if c.routes != nil {
		o.Routes = c.routes
	}
	if d.Dynamic != nil {
		o.Reports = audit.Reports{Client: d.Dynamic}
	}
	a, err := audit.New(o)
	if err != nil {
		return nil, fmt.Errorf("ccm.New: %w", err)
	}
	synced := func() bool { return services.HasSynced() && nodeInformer.HasSynced() && namespacesSynced() }
	watched := []auditWatch{{services, serviceChanged}, {nodeInformer, nodeChanged}}
	if !c.namespacesForbidden {
		watched = append(watched, auditWatch{d.Informers.Core().V1().Namespaces().Informer(), namespaceLabelsChanged})
	}
	return func(ctx context.Context, trigger <-chan struct{}) {
		changed := make(chan struct{}, 1)
		for _, w := range watched { // on the leader only: this function runs there (leaderLoops)
			if err := w.register(changed); err != nil {
				klog.ErrorS(err, "Policy audit: changes are not watched; they show at the next audit interval")
			}
		}
		klog.InfoS("Policy audit enabled", "interval", d.Options.PolicyAuditInterval, "policyReports", d.Dynamic != nil, "afterChanges", audit.DefaultDebounce)
		a.Run(ctx, synced, trigger, changed, d.Options.PolicyAuditInterval)
	}, nil
}

// auditWatch is one informer whose objects the audit's inputs read, and which of their changes
// matter: changed(old, cur) with old nil for an add and cur nil for a delete.
type auditWatch struct {
	informer cache.SharedIndexInformer
	changed  func(old, cur any) bool
}

// register signals on changed (without blocking: one signal pending is enough) each change of
// w's objects that matters to the audit (audit.Auditor.Run audits from the caches after its
// debounce). The adds of the informer's initial list are not changes.
func (w auditWatch) register(changed chan<- struct{}) error {
	signal := func(old, cur any) {
		if w.changed(deleted(old), cur) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
	_, err := w.informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial {
				signal(nil, obj)
			}
		},
		UpdateFunc: signal,
		DeleteFunc: func(obj any) { signal(obj, nil) },
	})
	if err != nil {
		return fmt.Errorf("watch the audit's inputs: %w", err)
	}
	return nil
}

// deleted unwraps the last state of a deleted object the informer did not see go.
func deleted(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// serviceChanged reports whether a Service's change matters to the audit: a Service of type
// LoadBalancer (before or after) added, deleted, or with another spec, annotations or labels.
// A status update (the CCM's own ingress patch) does not.
func serviceChanged(old, cur any) bool {
	o, _ := old.(*corev1.Service)
	c, _ := cur.(*corev1.Service)
	isLB := func(s *corev1.Service) bool { return s != nil && s.Spec.Type == corev1.ServiceTypeLoadBalancer }
	if !isLB(o) && !isLB(c) {
		return false
	}
	if o == nil || c == nil {
		return true
	}
	return !maps.Equal(o.Labels, c.Labels) || !maps.Equal(o.Annotations, c.Annotations) || !equality.Semantic.DeepEqual(o.Spec, c.Spec)
}

// nodeChanged reports whether a node's change matters to the audit: added, deleted, or other
// labels (which select the load balancers' targets).
func nodeChanged(old, cur any) bool {
	o, _ := old.(*corev1.Node)
	c, _ := cur.(*corev1.Node)
	switch {
	case o == nil && c == nil:
		return false
	case o == nil || c == nil:
		return true
	}
	return !maps.Equal(o.Labels, c.Labels)
}

// namespaceLabelsChanged reports whether a namespace's labels (namespace_labels) changed; an
// add or a delete is no change of labels (its Services come and go with their own events).
func namespaceLabelsChanged(old, cur any) bool {
	o, _ := old.(*corev1.Namespace)
	c, _ := cur.(*corev1.Namespace)
	return o != nil && c != nil && !maps.Equal(o.Labels, c.Labels)
}

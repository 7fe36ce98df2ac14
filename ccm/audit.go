package ccm

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
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
// only the leader calls it (leaderLoops). Without the right to list namespaces
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
		Decider: c.decider, Cluster: c.admission.cluster, ClusterName: d.ClusterName, Recorder: d.Recorder,
		NamespaceLabels: c.admission.exec.NamespaceLabels,
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
	return func(ctx context.Context, trigger <-chan struct{}) {
		klog.InfoS("Policy audit enabled", "interval", d.Options.PolicyAuditInterval, "policyReports", d.Dynamic != nil)
		a.Run(ctx, synced, trigger, d.Options.PolicyAuditInterval)
	}, nil
}

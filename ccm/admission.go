package ccm

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/admission"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// admissionParts are what the admission webhook reuses of the provider, kept by build.
type admissionParts struct {
	exec    *executor.Executor
	cluster input.Cluster
	// informers is the controller manager's factory (nil in tests without one).
	informers   informers.SharedInformerFactory
	clusterName string
	// namespacesForbidden: no namespace informer (see Cloud.namespacesForbidden).
	namespacesForbidden bool
}

// AdmissionConfig returns the admission webhook's configuration (ccm/admission) built from the
// provider's own parts, so the webhook cannot decide differently from the gate: the load
// balancer planner (loadbalancer.LoadBalancers.Preview), the policy engine (its revision and
// mode), the cluster view and the namespace labels of the executor, the inventory the gate
// prices plans with (under a policy), and the nodes of the informer the service controller reads. ok is false when there is nothing to review: load
// balancers are disabled (HCLOUD_LOAD_BALANCERS_ENABLED=false). Callers set ExemptUsers and
// Timeout.
//
// The node and namespace informers are registered here; call it before the informers start
// (the cloud initializer runs before). The controller manager starts them on the leader only:
// the caller starts them on every replica that serves the webhook.
func (c *Cloud) AdmissionConfig() (admission.Config, bool) {
	if !c.cfg.LoadBalancer.Enabled || c.lbs == nil {
		return admission.Config{}, false
	}
	p := c.admission
	cfg := admission.Config{
		Planner:     c.lbs,
		Gate:        gate.Gate{Decider: c.decider, Cluster: p.cluster},
		ClusterName: p.clusterName,
		Serves:      c.lbs.Serves,
	}
	if p.exec != nil {
		cfg.Gate = p.exec.Gate()
		cfg.Pricing = func() *lbplan.Pricing { // only under a policy: the cost warning needs the prices
			if _, named := cfg.Gate.Revision(); !named {
				return nil
			}
			return c.lbs.Pricing()
		}
	}
	if p.informers != nil {
		nodes := p.informers.Core().V1().Nodes()
		nodeInformer, lister := nodes.Informer(), nodes.Lister()
		cfg.Nodes = func() ([]*corev1.Node, error) { return lister.List(labels.Everything()) }
		cfg.Synced = nodeInformer.HasSynced
		if !p.namespacesForbidden { // else no namespace informer: lookups fail at once
			namespaces := p.informers.Core().V1().Namespaces().Informer()
			cfg.Synced = func() bool { return nodeInformer.HasSynced() && namespaces.HasSynced() }
		}
	}
	return cfg, true
}

package gate

import (
	"maps"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/routeplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// Inputs returns the policy input of every step of plan (plan.Steps, in order) for the Service
// view service (PolicyService) in cluster. It is pure. Every decision of a load balancer step,
// the CCM's, `plan`'s, the webhook's and the audit's, is on one of these inputs (Gate.Inputs).
//
// With plan.Pricing set, every input carries input.inventory, the inventory before its step
// (plan.Pricing.Inventory with the earlier steps of the plan applied: inventory.Apply), and
// input.cost (inventory.StepCost of the load balancer before and after the step). Pricing
// travels with the plan: whoever plans sets it (the CCM's load balancer code from its caches,
// `plan` from its state), so the gate calls back into no one.
func Inputs(plan lbplan.Plan, cluster input.Cluster, service *input.Service) []StepInput {
	steps := plan.Steps()
	out := make([]StepInput, 0, len(steps))
	var inv input.Inventory
	if plan.Pricing != nil {
		inv = plan.Pricing.Inventory
	}
	for i, st := range steps {
		in := stepInput(plan, st, cluster, service)
		if p := plan.Pricing; p != nil {
			in.Inventory, in.Cost = priced(inv, in, p.Prices)
			if i < len(steps)-1 { // the inventory after the last step is no step's
				inv = inventory.Apply(inv, in, p.Prices)
			}
		}
		out = append(out, StepInput{Label: st.Label(), Input: in})
	}
	return out
}

// priced returns the inventory and the cost that the input of a step carries: inv is the
// inventory before the step.
func priced(inv input.Inventory, in input.Input, prices inventory.Prices) (*input.Inventory, *input.Cost) {
	after := in.LoadBalancer
	if in.Action == input.ActionLoadBalancerDelete {
		after = nil
	}
	cost := inventory.StepCost(in.Current, after, prices)
	return &inv, &cost
}

// stepInput is the input of one step of plan, without inventory and cost.
func stepInput(plan lbplan.Plan, st lbplan.Step, cluster input.Cluster, service *input.Service) input.Input {
	return input.Input{
		Version:      input.InputVersion,
		Action:       st.Mutation.Action(),
		Operation:    st.Mutation.Operation(),
		Cluster:      cluster,
		Service:      service,
		LoadBalancer: st.LoadBalancer,
		Current:      st.Current,
		Final:        st.Final,
		Target:       st.Target,
		Listener:     st.Listener,
		Certificate:  st.Certificate,
		Group:        plan.Group,
	}
}

// RouteInputs returns the policy input of every mutation of plan in cluster, in order. It is
// pure; the executor's gate of route plans decides exactly these inputs, and the policy audit
// judges an existing route by the input of its add_route.
func RouteInputs(plan routeplan.Plan, cluster input.Cluster) []StepInput {
	out := make([]StepInput, 0, len(plan.Mutations))
	for _, m := range plan.Mutations {
		r := m.Route()
		out = append(out, StepInput{Label: m.Label(), Input: input.Input{
			Version: input.InputVersion, Action: m.Action(), Operation: m.Operation(), Cluster: cluster,
			Route: &input.Route{Destination: r.Destination.String(), Gateway: r.Gateway.String(), Node: plan.Node},
		}})
	}
	return out
}

// PolicyService is the policy view of svc, with nsLabels as the labels of its namespace; nil
// for a nil svc. It is pure and copies what it takes from svc. The annotations leave out
// annotation.PolicyRetry, the CCM's own trigger of a retry: a retry is decided on what the
// Service asks for, not on when it was retried (TestPolicyService_leavesOutTheRetryAnnotation).
func PolicyService(svc *corev1.Service, nsLabels map[string]string) *input.Service {
	if svc == nil {
		return nil
	}
	s := &input.Service{
		Namespace:                svc.Namespace,
		Name:                     svc.Name,
		UID:                      string(svc.UID),
		Labels:                   copyMap(svc.Labels),
		Annotations:              copyMap(svc.Annotations),
		Ports:                    []input.ServicePort{},
		LoadBalancerSourceRanges: append([]string{}, svc.Spec.LoadBalancerSourceRanges...),
		ExternalTrafficPolicy:    string(svc.Spec.ExternalTrafficPolicy),
	}
	delete(s.Annotations, annotation.PolicyRetry)
	if svc.Spec.LoadBalancerClass != nil {
		s.LoadBalancerClass = *svc.Spec.LoadBalancerClass
	}
	if nsLabels != nil { // nil stays null: no namespace lister (Gate.NamespaceLabels)
		s.NamespaceLabels = copyMap(nsLabels)
	}
	for _, p := range svc.Spec.Ports {
		s.Ports = append(s.Ports, input.ServicePort{Name: p.Name, Protocol: string(p.Protocol), Port: p.Port, NodePort: p.NodePort})
	}
	return s
}

// copyMap is a copy of m, never nil.
func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	maps.Copy(out, m)
	return out
}

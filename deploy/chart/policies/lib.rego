# Helpers shared by the rules of package ccm.
package ccm

# Mutations that create or change a load balancer: the desired state in
# input.load_balancer must satisfy the rules. Deletions are checked only by
# protection.rego, so that a policy never blocks cleaning up.
lb_changes if input.action in {"loadbalancer.create", "loadbalancer.update"}

# The labels of the Service's namespace ({} when the CCM could not read them).
namespace_labels := labels if {
	labels := input.service.namespace_labels
	is_object(labels)
} else := {}

namespace := input.service.namespace

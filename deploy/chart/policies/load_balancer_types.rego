# Load balancer types: only the types in data.config.load_balancer_types, and
# the large ones (data.config.large_load_balancer_types, e.g. lb31) only in
# namespaces labelled with data.config.large_load_balancer_label=true.
package ccm

deny contains {"msg": msg, "code": "lb_type_not_allowed"} if {
	lb_changes
	not input.load_balancer.type in data.config.load_balancer_types
	msg := sprintf("load balancer type %q is not allowed (allowed: %s); set the annotation load-balancer.hetzner.cloud/type", [
		input.load_balancer.type,
		concat(", ", data.config.load_balancer_types),
	])
}

deny contains {"msg": msg, "code": "lb_type_needs_namespace_label"} if {
	lb_changes
	input.load_balancer.type in data.config.large_load_balancer_types
	object.get(namespace_labels, data.config.large_load_balancer_label, "") != "true"
	msg := sprintf("load balancer type %q needs the namespace %q to be labelled %s=true; use lb11 or lb21, or ask the cluster admins for the label", [
		input.load_balancer.type,
		namespace,
		data.config.large_load_balancer_label,
	])
}

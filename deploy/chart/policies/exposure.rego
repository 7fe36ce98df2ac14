# Public exposure: a load balancer with a public interface only for Services in
# namespaces listed in data.config.public_namespaces or labelled
# data.config.public_label=true. Elsewhere the load balancer must be private
# (annotation load-balancer.hetzner.cloud/disable-public-network: "true").
package ccm

deny contains {"msg": msg, "code": "public_exposure_not_allowed"} if {
	lb_changes
	input.load_balancer.public_interface
	not public_namespace
	msg := sprintf("namespace %q may not expose load balancers publicly: label the namespace %s=true, or make the load balancer private with the annotation load-balancer.hetzner.cloud/disable-public-network: \"true\"", [
		namespace,
		data.config.public_label,
	])
}

public_namespace if namespace in data.config.public_namespaces

public_namespace if object.get(namespace_labels, data.config.public_label, "") == "true"

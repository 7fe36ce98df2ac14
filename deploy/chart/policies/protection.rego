# Protection: load balancers labelled data.config.protected_label=true (on the
# Hetzner side) are never deleted by the CCM. Remove the label in the Hetzner
# console or API first.
package ccm

deny contains {"msg": msg, "code": "load_balancer_protected"} if {
	input.action == "loadbalancer.delete"
	input.current.labels[data.config.protected_label] == "true"
	msg := sprintf("load balancer %q is labelled %s=true and must not be deleted; remove the label in Hetzner Cloud first", [
		input.current.name,
		data.config.protected_label,
	])
}

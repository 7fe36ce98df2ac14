# Listen ports: only the ports in data.config.listen_ports. Messages here are
# plain strings, the simplest form the CCM accepts.
#
# The rule looks at input.load_balancer.services on create and update: a create
# shows every listener its request carries, and an add_service (a listener added
# to an existing load balancer) shows the load balancer with the new listener.
# A rule on input.operation == "add_service" alone would miss the listeners of a
# create.
package ccm

# Only the step that adds the listener is denied: a later step of the same plan
# (add_service(443), add_target) still has port 22 in its state, and denying it
# too would name changes that are fine. A listener that exists already (created
# before this rule) does not block unrelated updates such as a node joining.
deny contains msg if {
	lb_changes
	some svc in input.load_balancer.services
	not svc.listen_port in data.config.listen_ports
	adds_listener(svc.listen_port)
	msg := sprintf("listen port %d is not allowed (allowed: %v)", [svc.listen_port, data.config.listen_ports])
}

# A warning does not block: plain HTTP without HTTPS is allowed but reported.
# It looks at input.final, the state after the whole reconcile (on an existing
# load balancer a listener on 443 may be added by a later request of the same
# plan), and fires only on the decision that adds port 80, so one reconcile
# warns once.
warn contains msg if {
	lb_changes
	final_ports := {svc.listen_port | some svc in object.get(input, ["final", "services"], [])}
	80 in final_ports
	not 443 in final_ports
	adds_listener(80)
	msg := "the load balancer listens on port 80 without 443: traffic is not encrypted"
}

# adds_listener(port) is true when this step adds a listener on port.
adds_listener(port) if {
	port in {svc.listen_port | some svc in input.load_balancer.services}
	not port in {svc.listen_port | some svc in object.get(input, ["current", "services"], [])}
}

# Listen ports: only the ports in data.config.listen_ports. Messages here are
# plain strings, the simplest form the CCM accepts.
package ccm

deny contains msg if {
	lb_changes
	some svc in input.load_balancer.services
	not svc.listen_port in data.config.listen_ports
	msg := sprintf("listen port %d is not allowed (allowed: %v)", [svc.listen_port, data.config.listen_ports])
}

# A warning does not block: plain HTTP without HTTPS is allowed but reported.
warn contains msg if {
	lb_changes
	ports := {svc.listen_port | some svc in input.load_balancer.services}
	80 in ports
	not 443 in ports
	msg := "the load balancer listens on port 80 without 443: traffic is not encrypted"
}

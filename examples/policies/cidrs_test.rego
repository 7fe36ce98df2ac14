package ccm_test

test_route_outside_cluster_cidr_denied if {
	inp := object.union(data.inputs.route_create, {"route": {"destination": "192.168.7.0/24"}})
	codes(inp) == {"route_outside_cluster_cidr"}
}

test_route_gateway_outside_network_denied if {
	inp := object.union(data.inputs.route_create, {"route": {"gateway": "172.16.0.3"}})
	codes(inp) == {"route_gateway_outside_network"}
}

test_route_without_network_checks_only_cidr if {
	inp := object.union(data.inputs.route_create, {"cluster": {"network": null}, "route": {"gateway": "172.16.0.3"}})
	count(denials(inp)) == 0
}

test_route_delete_allowed if {
	inp := object.union(data.inputs.route_create, {"action": "route.delete", "operation": "delete_route", "route": {"destination": "192.168.7.0/24"}})
	count(denials(inp)) == 0
}

test_private_ip_outside_subnets_denied if {
	inp := object.union(data.inputs.lb_create_default, {"load_balancer": {"network": {"private_ip": "192.168.1.5"}}})
	codes(inp) == {"private_ip_not_allowed"}
}

test_private_ip_auto_assigned_allowed if {
	inp := object.union(data.inputs.lb_create_default, {"load_balancer": {"network": {"private_ip": ""}}})
	count(denials(inp)) == 0
}

test_load_balancer_without_network_allowed if {
	inp := object.union(data.inputs.lb_create_default, {"load_balancer": {"network": null}})
	count(denials(inp)) == 0
}

test_source_ranges_denied if {
	inp := object.union(data.inputs.lb_create_default, {"service": {"load_balancer_source_ranges": ["203.0.113.0/24"]}})
	codes(inp) == {"source_ranges_unsupported"}
	some msg in texts(inp)
	contains(msg, "cannot enforce")
}

test_source_ranges_null_allowed if {
	inp := object.union(data.inputs.lb_create_default, {"service": {"load_balancer_source_ranges": null}})
	count(denials(inp)) == 0
}

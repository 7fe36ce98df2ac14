package ccm_test

test_eu_locations_allowed[loc] if {
	some loc in ["fsn1", "nbg1", "hel1"]
	inp := object.union(data.inputs.lb_create_default, {"load_balancer": {"location": loc}})
	count(denials(inp)) == 0
}

test_location_outside_eu_denied[loc] if {
	some loc in ["ash", "hil", "sin"]
	inp := object.union(data.inputs.lb_create_default, {"load_balancer": {"location": loc}})
	codes(inp) == {"location_not_allowed"}
}

test_network_zone_outside_eu_denied if {
	inp := object.union(data.inputs.lb_create_default, {"load_balancer": {"location": "", "network_zone": "us-east"}})
	codes(inp) == {"network_zone_not_allowed"}
}

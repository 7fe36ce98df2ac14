package ccm_test

test_other_listen_port_denied_with_string_message if {
	inp := json.patch(data.inputs.lb_create_default, [{
		"op": "add",
		"path": "/load_balancer/services/-",
		"value": {"protocol": "tcp", "listen_port": 8080, "destination_port": 30081, "proxyprotocol": false},
	}])
	denials(inp) == {"listen port 8080 is not allowed (allowed: [80, 443])"}
}

# A create carries its listeners: port 22 in the create request is denied on
# loadbalancer.create, before anything reaches Hetzner.
test_port_22_in_a_create_denied if {
	inp := json.patch(data.inputs.lb_create_default, [{
		"op": "add",
		"path": "/load_balancer/services/0",
		"value": {"protocol": "tcp", "listen_port": 22, "destination_port": 30022, "proxyprotocol": false},
	}])
	inp.action == "loadbalancer.create"
	denials(inp) == {"listen port 22 is not allowed (allowed: [80, 443])"}
}

# Port 22 added to an existing load balancer is its own add_service request.
test_port_22_added_later_denied if {
	data.inputs.lb_update_add_service.listener.listen_port == 22
	denials(data.inputs.lb_update_add_service) == {"listen port 22 is not allowed (allowed: [80, 443])"}
}

# An update that adds a listener on 8080 is denied; the later steps of the same
# plan, whose state still holds it, are not (the deny event names only the step
# that adds it), and neither is an unrelated update of a load balancer that
# already listens on 8080.
test_only_the_step_adding_a_port_is_denied if {
	with_8080 := json.patch(data.inputs.lb_create_default.load_balancer, [{
		"op": "add",
		"path": "/services/-",
		"value": {"protocol": "tcp", "listen_port": 8080, "destination_port": 30081, "proxyprotocol": false},
	}])
	adds := object.union(data.inputs.lb_create_default, {
		"action": "loadbalancer.update", "operation": "add_service",
		"current": data.inputs.lb_create_default.load_balancer, "load_balancer": with_8080,
	})
	denials(adds) == {"listen port 8080 is not allowed (allowed: [80, 443])"}
	later := object.union(adds, {"operation": "add_target", "current": with_8080})
	denials(later) == set()
}

test_http_without_https_warns if {
	inp := json.patch(data.inputs.lb_create_default, [
		{"op": "remove", "path": "/load_balancer/services/1"},
		{"op": "remove", "path": "/final/services/1"},
	])
	count(denials(inp)) == 0
	warnings(inp) == {"the load balancer listens on port 80 without 443: traffic is not encrypted"}
}

# A step that adds port 80 while a later step of the same plan adds 443: the
# final state is encrypted, so no warning.
test_http_with_https_later_in_the_plan_does_not_warn if {
	inp := json.patch(data.inputs.lb_create_default, [{"op": "remove", "path": "/load_balancer/services/1"}])
	warnings(inp) == set()
}

# The warning fires only on the step that adds port 80, not on later steps.
test_http_warning_only_on_the_step_adding_port_80 if {
	inp := json.patch(data.inputs.lb_create_default, [
		{"op": "remove", "path": "/load_balancer/services/1"},
		{"op": "remove", "path": "/final/services/1"},
		{"op": "replace", "path": "/action", "value": "loadbalancer.update"},
		{"op": "replace", "path": "/operation", "value": "add_target"},
		{"op": "replace", "path": "/current", "value": data.inputs.lb_create_default.load_balancer},
	])
	warnings(inp) == set()
}

package ccm_test

test_other_listen_port_denied_with_string_message if {
	inp := json.patch(data.inputs.lb_create_default, [{
		"op": "add",
		"path": "/load_balancer/services/-",
		"value": {"protocol": "tcp", "listen_port": 8080, "destination_port": 30081, "proxyprotocol": false},
	}])
	denials(inp) == {"listen port 8080 is not allowed (allowed: [80, 443])"}
}

test_http_without_https_warns if {
	inp := json.patch(data.inputs.lb_create_default, [{"op": "remove", "path": "/load_balancer/services/1"}])
	count(denials(inp)) == 0
	warnings(inp) == {"the load balancer listens on port 80 without 443: traffic is not encrypted"}
}

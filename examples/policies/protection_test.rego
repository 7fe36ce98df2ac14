package ccm_test

test_protected_delete_denied if {
	codes(data.inputs.lb_delete_protected) == {"load_balancer_protected"}
	some msg in texts(data.inputs.lb_delete_protected)
	contains(msg, "must not be deleted")
}

test_unprotected_delete_allowed if {
	inp := object.union(data.inputs.lb_delete_protected, {"current": {"labels": {"hcloud-ccm/protected": "false"}}})
	count(denials(inp)) == 0
}

test_delete_without_labels_allowed if {
	inp := object.union(data.inputs.lb_delete_protected, {"current": {"labels": null}})
	count(denials(inp)) == 0
}

test_delete_ignores_rules_for_desired_state if {
	inp := object.union(data.inputs.lb_delete_protected, {
		"service": {"namespace": "shop", "namespace_labels": {}, "load_balancer_source_ranges": ["0.0.0.0/0"]},
		"current": {"type": "lb31", "location": "ash", "labels": null},
	})
	count(denials(inp)) == 0
}

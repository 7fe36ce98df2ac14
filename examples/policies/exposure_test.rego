package ccm_test

test_public_in_default_namespace_allowed if {
	count(denials(data.inputs.lb_create_default)) == 0
}

test_public_in_unlabelled_namespace_denied if {
	inp := object.union(data.inputs.lb_create_default, {"service": {"namespace": "shop", "namespace_labels": {}}})
	codes(inp) == {"public_exposure_not_allowed"}
	some msg in texts(inp)
	contains(msg, `namespace "shop" may not expose load balancers publicly`)
}

test_public_with_unreadable_namespace_labels_denied if {
	inp := object.union(data.inputs.lb_create_default, {"service": {"namespace": "shop", "namespace_labels": null}})
	codes(inp) == {"public_exposure_not_allowed"}
}

test_public_in_labelled_namespace_allowed if {
	inp := object.union(data.inputs.lb_create_default, {"service": {"namespace": "shop", "namespace_labels": {"hcloud-ccm/public": "true"}}})
	count(denials(inp)) == 0
}

test_private_in_unlabelled_namespace_allowed if {
	inp := object.union(data.inputs.lb_create_default, {
		"service": {"namespace": "shop", "namespace_labels": {}},
		"load_balancer": {"public_interface": false},
	})
	count(denials(inp)) == 0
}

package ccm_test

test_lb31_in_unlabelled_namespace_denied if {
	codes(data.inputs.lb_create_lb31_unlabelled) == {"lb_type_needs_namespace_label"}
	some msg in texts(data.inputs.lb_create_lb31_unlabelled)
	contains(msg, `load balancer type "lb31" needs the namespace "shop" to be labelled hcloud-ccm/large-load-balancers=true`)
}

test_lb31_in_labelled_namespace_allowed if {
	inp := json.patch(data.inputs.lb_create_lb31_unlabelled, [{
		"op": "add",
		"path": "/service/namespace_labels/hcloud-ccm~1large-load-balancers",
		"value": "true",
	}])
	count(denials(inp)) == 0
}

test_unknown_type_denied if {
	inp := object.union(data.inputs.lb_create_default, {"load_balancer": {"type": "lb99"}})
	codes(inp) == {"lb_type_not_allowed"}
}

test_lb31_change_type_in_unlabelled_namespace_denied if {
	inp := object.union(data.inputs.lb_update_change_type, {"service": {"namespace_labels": null}})
	"lb_type_needs_namespace_label" in codes(inp)
}

test_small_types_allowed_everywhere[typ] if {
	some typ in ["lb11", "lb21"]
	inp := object.union(data.inputs.lb_create_lb31_unlabelled, {"load_balancer": {"type": typ}})
	count(denials(inp)) == 0
}

# The `every` form of docs/policy.md § Testing: `every` takes no `with`, so
# the set is evaluated under `with` first (data.ccm: this file imports nothing).
test_every_denial_of_lb31_names_the_label if {
	denials := data.ccm.deny with input as data.inputs.lb_create_lb31_unlabelled
	count(denials) > 0
	every m in denials {
		m.code == "lb_type_needs_namespace_label"
	}
}

package ccm_test

# The tests add an inventory and a cost to the recorded samples: the namespace
# "default" owns `owned` lb11 load balancers at 5.39 EUR net a month each, and
# the cluster has `lb31s` lb31 besides.
with_inventory(inp, owned, lb31s) := object.union(inp, {
	"inventory": {
		"currency": "EUR",
		"load_balancers": [],
		"namespaces": {"default": {
			"load_balancers": owned, "by_type": {"lb11": owned},
			"monthly_net": owned * 5.39, "monthly_gross": owned * 6.41,
		}},
		"cluster": {
			"load_balancers": owned + lb31s, "by_type": {"lb11": owned, "lb31": lb31s},
			"monthly_net": (owned * 5.39) + (lb31s * 35.58), "monthly_gross": (owned * 6.41) + (lb31s * 42.34),
		},
	},
	"cost": {
		"currency": "EUR",
		"before": {"monthly_net": 0, "monthly_gross": 0},
		"after": {"monthly_net": 5.39, "monthly_gross": 6.41},
		"delta": {"monthly_net": 5.39, "monthly_gross": 6.41},
	},
})

# budgeted labels the namespace of inp with a monthly budget.
budgeted(inp, budget) := json.patch(inp, [{
	"op": "add",
	"path": "/service/namespace_labels/hcloud-policy-ccm.io~1monthly-budget",
	"value": budget,
}])

# quota_denials are the deny messages of the quota rules for inp.
quota_denials(inp) := {m | some m in denials(inp); startswith(m.code, "quota_")}

quota_codes(inp) := {m.code | some m in quota_denials(inp)}

create := data.inputs.lb_create_default

test_third_load_balancer_allowed_under_quota_of_3 if {
	count(quota_denials(with_inventory(create, 2, 0))) == 0 with data.config.quotas.max_load_balancers_per_namespace as 3
}

test_fourth_load_balancer_denied_under_quota_of_3 if {
	quota_denials(with_inventory(create, 3, 0)) == {{
		"code": "quota_load_balancers_per_namespace",
		"enforcement": "dryrun",
		"msg": `namespace "default" already owns 3 load balancers and at most 3 are allowed (data.config.quotas.max_load_balancers_per_namespace); delete one, or share one with the annotation service.hcloud-policy-ccm.io/load-balancer-group`,
	}} with data.config.quotas.max_load_balancers_per_namespace as 3
}

# The audit judges an existing load balancer on the older ones: its message says so.
test_audit_names_the_extra_load_balancer if {
	audited := object.union(with_inventory(create, 2, 0), {"audit": true})
	quota_denials(audited) == {{
		"code": "quota_load_balancers_per_namespace",
		"enforcement": "dryrun",
		"msg": `namespace "default" already owned 2 load balancers when this one was created and at most 2 are allowed (data.config.quotas.max_load_balancers_per_namespace); delete one, or share one with the annotation service.hcloud-policy-ccm.io/load-balancer-group`,
	}} with data.config.quotas.max_load_balancers_per_namespace as 2
}

test_audit_budget_message if {
	audited := object.union(budgeted(with_inventory(create, 3, 0), "20"), {"audit": true})
	some m in quota_denials(audited)
	m.msg == `namespace "default" costs 21.56 EUR a month with this load balancer (16.17 for the older ones, 5.39 this one), above its budget of 20 (namespace label hcloud-policy-ccm.io/monthly-budget); raise the label or free a load balancer first`
}

test_audit_type_message if {
	audited := object.union(with_inventory(create, 0, 2), {"load_balancer": {"type": "lb31"}, "audit": true})
	some m in quota_denials(audited)
	m.msg == `the cluster already had 2 load balancers of type "lb31" when this one was created and at most 2 are allowed (data.config.quotas.max_per_cluster_by_type); use another type with the annotation load-balancer.hetzner.cloud/type`
}

test_enforced_when_configured if {
	some m in quota_denials(with_inventory(create, 3, 0)) with data.config.quotas as {"max_load_balancers_per_namespace": 3, "enforcement": "enforce"}
	m.enforcement == "enforce"
}

# Only a create adds a load balancer: updates of a namespace at its quota go on.
test_update_at_quota_allowed if {
	count(quota_denials(with_inventory(data.inputs.lb_update_add_service, 3, 0))) == 0 with data.config.quotas.max_load_balancers_per_namespace as 3
}

# A group's load balancer counts in the group's home namespace.
test_group_counts_in_home_namespace if {
	inp := object.union(with_inventory(create, 3, 0), {
		"service": {"namespace": "shop"},
		"group": {"name": "web", "namespace": "default"},
	})
	quota_codes(inp) == {"quota_load_balancers_per_namespace"} with data.config.quotas.max_load_balancers_per_namespace as 3
}

test_no_quota_without_settings if {
	config := object.remove(data.config, ["quotas"])
	count(quota_denials(with_inventory(create, 100, 100))) == 0 with data.config as config
}

test_third_lb31_denied if {
	lb31 := object.union(with_inventory(create, 0, 2), {"load_balancer": {"type": "lb31"}})
	some m in quota_denials(lb31)
	m.code == "quota_type_per_cluster"
	m.msg == `the cluster already has 2 load balancers of type "lb31" and at most 2 are allowed (data.config.quotas.max_per_cluster_by_type); use another type with the annotation load-balancer.hetzner.cloud/type`
}

test_second_lb31_allowed if {
	lb31 := object.union(with_inventory(create, 0, 1), {"load_balancer": {"type": "lb31"}})
	count(quota_denials(lb31)) == 0
}

test_change_type_to_third_lb31_denied if {
	change := data.inputs.lb_update_change_type
	change.current.type == "lb11"
	change.load_balancer.type == "lb31"
	quota_codes(with_inventory(change, 1, 2)) == {"quota_type_per_cluster"}
}

test_lb11_not_counted_against_lb31 if {
	count(quota_denials(with_inventory(create, 0, 5))) == 0
}

test_budget_crossed_denied if {
	quota_denials(budgeted(with_inventory(create, 3, 0), "20")) == {{
		"code": "quota_monthly_budget",
		"enforcement": "dryrun",
		"msg": `namespace "default" would cost 21.56 EUR a month (now 16.17, this step adds 5.39), above its budget of 20 (namespace label hcloud-policy-ccm.io/monthly-budget); raise the label or free a load balancer first`,
	}}
}

test_budget_reached_exactly_allowed if {
	count(quota_denials(budgeted(with_inventory(create, 3, 0), "21.56"))) == 0
}

test_budget_ignored_when_step_lowers_cost if {
	cheaper := object.union(budgeted(with_inventory(create, 3, 0), "1"), {"cost": {"delta": {"monthly_net": -5.39, "monthly_gross": -6.41}}})
	count(quota_denials(cheaper)) == 0
}

test_no_budget_without_label if {
	count(quota_denials(with_inventory(create, 30, 0))) == 0 with data.config.quotas.max_load_balancers_per_namespace as 100
}

test_budget_label_not_a_number_denied if {
	quota_codes(budgeted(with_inventory(create, 0, 0), "fifty")) == {"quota_budget_label_invalid"}
	some m in quota_denials(budgeted(with_inventory(create, 0, 0), "fifty"))
	contains(m.msg, `namespace "default" has the label hcloud-policy-ccm.io/monthly-budget="fifty", which is not an amount`)
}

test_money_formats_whole_and_fractional_amounts if {
	data.ccm.money(15) == "15.00"
	data.ccm.money(5.39) == "5.39"
	data.ccm.money(16.169999) == "16.17"
	data.ccm.money(0) == "0.00"
}

test_route_not_priced if {
	count(quota_denials(data.inputs.route_create)) == 0
}

# The recorded samples carry the inventory and the cost the CCM builds
# (placeholder prices of the emulator: lb11 5, lb31 20 EUR net a month).
test_sample_change_type_is_priced if {
	change := data.inputs.lb_update_change_type
	change.inventory.namespaces.analytics.load_balancers == 1
	change.cost.delta.monthly_net == 15
	count(quota_denials(change)) == 0
}

test_sample_change_type_over_budget_denied if {
	inp := budgeted(data.inputs.lb_update_change_type, "10")
	some m in quota_denials(inp)
	m.code == "quota_monthly_budget"
	m.msg == `namespace "analytics" would cost 20.00 EUR a month (now 5.00, this step adds 15.00), above its budget of 10 (namespace label hcloud-policy-ccm.io/monthly-budget); raise the label or free a load balancer first`
}

test_sample_change_type_to_lb31_counts_against_the_cluster_cap if {
	quota_codes(data.inputs.lb_update_change_type) == {"quota_type_per_cluster"} with data.config.quotas.max_per_cluster_by_type as {"lb31": 0}
}

test_sample_create_in_empty_inventory if {
	create.inventory.cluster.load_balancers == 0
	count(quota_denials(create)) == 0
	quota_codes(create) == {"quota_load_balancers_per_namespace"} with data.config.quotas.max_load_balancers_per_namespace as 0
}

test_sample_delete_never_over_budget if {
	del := budgeted(data.inputs.lb_delete_protected, "0")
	del.cost.delta.monthly_net < 0
	count(quota_denials(del)) == 0
}

package ccm_test

# The tests start from the recorded sample of a member joining a group:
# default/api adds its listener on 443 to group web's load balancer, which
# listens on 80 for the leader default/frontend. in_group varies who acts and
# who the members are.
add_443 := data.inputs.lb_update_group_add_service

test_sample_group_join_allowed if {
	add_443.operation == "add_service"
	add_443.group.name == "web"
	count(denials(add_443)) == 0
}

# in_group(inp, ns, name, members) is inp as Service ns/name, acting in group
# "web" whose members are members (oldest first). The namespace is labelled
# public, so that exposure.rego allows the public interface everywhere.
in_group(inp, ns, name, members) := object.union(inp, {
	"service": {"namespace": ns, "name": name, "namespace_labels": {"hcloud-ccm/public": "true"}},
	"group": {
		"name": "web",
		"namespace": "default",
		"leader": {"namespace": members[0].namespace, "name": members[0].name},
		"members": members,
		"capacity": {"type": "lb11", "max_services": 5, "used": count(inp.load_balancer.services)},
	},
})

member(ns, name, ports) := {"namespace": ns, "name": name, "ports": ports}

# Two members in namespace default: frontend (the leader, port 80) and api (443).
same_namespace := [member("default", "frontend", [80]), member("default", "api", [443])]

# The same, with api in namespace shop.
across := [member("default", "frontend", [80]), member("shop", "api", [443])]

test_group_in_one_namespace_allowed if {
	count(denials(in_group(add_443, "default", "api", same_namespace))) == 0
	count(denials(in_group(data.inputs.lb_create_default, "default", "frontend", same_namespace))) == 0
}

# A Service without the annotation has "group": null: no group rule applies.
test_no_group_no_group_rule if {
	inp := object.union(data.inputs.lb_create_default, {"group": null})
	count(denials(inp)) == 0
}

test_member_in_other_namespace_denied if {
	denials(in_group(add_443, "shop", "api", across)) == {{
		"code": "group_cross_namespace",
		"msg": `Service shop/api may not join load balancer group "web": the group lives in namespace "default" (recorded on its load balancer when it was created); list the group in data.config.cross_namespace_groups to share it across namespaces, or use a group name of its own`,
	}}
}

# Every step that grows the load balancer is denied for the refused member,
# not only the ones adding its listeners.
test_target_added_by_member_in_other_namespace_denied if {
	target := object.union(in_group(add_443, "shop", "api", across), {
		"operation": "add_target",
		"current": add_443.load_balancer,
		"target": {"type": "server", "server_id": 42, "use_private_ip": false},
	})
	codes(target) == {"group_cross_namespace"}
}

# Succession (issue 34 §2): the home's members are gone and shop/api, the oldest
# member left, leads. The group still lives in "default" (input.group.namespace,
# recorded on its load balancer): shop/api is refused as before.
test_member_in_other_namespace_denied_when_it_leads if {
	inp := in_group(add_443, "shop", "api", [member("shop", "api", [443])])
	inp.group.leader == {"namespace": "shop", "name": "api"}
	codes(inp) == {"group_cross_namespace"}
}

test_listed_group_shared_across_namespaces if {
	inp := in_group(add_443, "shop", "api", across)
	count(denials(inp)) == 0 with data.config.cross_namespace_groups as ["web"]
	codes(inp) == {"group_cross_namespace"} with data.config.cross_namespace_groups as ["shop"]
}

# A decision of the leader that neither acts for the refused member nor adds
# its listener is allowed: a target, and the leader's own listener. (In the CCM
# a plan of the leader that also adds the refused member's listener is made
# again without that member, so these decisions go through.)
test_leaders_own_decisions_allowed if {
	target := object.union(in_group(add_443, "default", "frontend", across), {
		"operation": "add_target",
		"current": add_443.load_balancer,
		"target": {"type": "server", "server_id": 42, "use_private_ip": false},
	})
	count(denials(target)) == 0
	own := in_group(add_443, "default", "frontend", [member("default", "frontend", [443]), member("shop", "api", [8443])])
	count(denials(own)) == 0
}

# A listener that the step adds is refused when its owner is, whichever
# member's sync sends it.
test_listener_of_foreign_member_denied_in_leaders_sync if {
	codes(in_group(add_443, "default", "frontend", across)) == {"group_cross_namespace"}
}

# A refused member can always leave: removing its listener is never denied.
test_foreign_member_may_leave if {
	removal := object.union(in_group(add_443, "shop", "api", across), {
		"operation": "delete_service",
		"current": add_443.load_balancer,
		"load_balancer": add_443.current,
	})
	count(denials(removal)) == 0
}

# A deletion of the group's load balancer is checked by protection.rego only.
test_group_delete_not_denied_by_group_rules if {
	del := json.patch(in_group(data.inputs.lb_delete_protected, "shop", "api", across), [{"op": "replace", "path": "/current/labels", "value": {}}])
	del.action == "loadbalancer.delete"
	count(denials(del)) == 0
}

test_members_over_the_limit_denied if {
	members := [
		member("default", "a", [80]),
		member("default", "b", [8080]),
		member("default", "api", [443]),
	]
	denials(in_group(add_443, "default", "api", members)) == {{
		"code": "group_too_many_members",
		"msg": `Service default/api may not join load balancer group "web": the group has 3 members and at most 2 are allowed (data.config.max_group_members); it is member 3 by age, use a group or a load balancer of its own`,
	}} with data.config.max_group_members as 2

	# The oldest members keep working, but cannot add the listener of a
	# refused member for it.
	target := object.union(in_group(add_443, "default", "b", members), {
		"operation": "add_target",
		"current": add_443.load_balancer,
		"target": {"type": "server", "server_id": 42, "use_private_ip": false},
	})
	count(denials(target)) == 0 with data.config.max_group_members as 2
	codes(in_group(add_443, "default", "b", members)) == {"group_too_many_members"} with data.config.max_group_members as 2
	count(denials(in_group(add_443, "default", "api", members))) == 0 with data.config.max_group_members as 3
}

test_default_limit_is_ten_members if {
	members := [member("default", sprintf("m%d", [i]), [8000 + i]) | some i in numbers.range(1, 10)]
	count(denials(in_group(data.inputs.lb_create_default, "default", "m10", members))) == 0
	eleven := array.concat(members, [member("default", "api", [443])])
	codes(in_group(add_443, "default", "api", eleven)) == {"group_too_many_members"}
}

# A member refused for both reasons gets both messages.
test_both_refusals if {
	members := [member("default", "frontend", [80]), member("default", "b", [8080]), member("shop", "api", [443])]
	codes(in_group(add_443, "shop", "api", members)) == {"group_cross_namespace", "group_too_many_members"} with data.config.max_group_members as 2
}

# A Service outside group pay may not take the name of pay's load balancer.
test_group_name_reserved_for_the_group if {
	inp := object.union(data.inputs.lb_create_default, {
		"group": null,
		"load_balancer": {"name": sprintf("%s-group-pay", [data.inputs.lb_create_default.cluster.name])},
	})
	some d in denials(inp)
	d.code == "group_name_reserved"
}

# The group's own load balancer keeps its name.
test_group_name_of_the_group_allowed if {
	inp := in_group(data.inputs.lb_create_default, "default", "frontend", same_namespace)
	named := object.union(inp, {"load_balancer": {"name": sprintf("%s-group-web", [inp.cluster.name])}})
	every d in denials(named) {
		d.code != "group_name_reserved"
	}
}

# The soak's case (issue 45): shop/api, refused, now owns port 443 after the
# member that held it left; the leader's sync points the existing 443 listener
# at shop/api's node port (update_service). That serves the refused member as
# much as adding its listener would: denied. A change of the leader's own
# listener stays allowed.
test_listener_taken_over_by_refused_member_denied if {
	lb := add_443.load_balancer
	current := object.union(lb, {"services": [object.union(s, {"destination_port": 30999}) | some s in lb.services]})
	retarget := object.union(in_group(add_443, "default", "frontend", across), {
		"operation": "update_service",
		"current": current,
	})
	codes(retarget) == {"group_cross_namespace"}
}

# Shared load balancers (annotation service.hcloud-policy-ccm.io/load-balancer-group,
# docs/shared-load-balancers.md): who may share one load balancer.
#
# - A group lives in one namespace, its home (input.group.namespace: the
#   namespace of its oldest member when its load balancer was created, recorded
#   on the load balancer; leadership never moves it), unless the group's name is
#   listed in data.config.cross_namespace_groups. A member of another namespace
#   is refused whoever leads, also when it outlives the home's members.
# - A group has at most data.config.max_group_members members; the oldest ones
#   (input.group.members is ordered by age) are in, the newer ones are refused.
# - The name <cluster name>-group-<group> is group <group>'s alone: no other
#   Service or group may give its load balancer that name (the CCM refuses it
#   too, before any write; this rule says so in plan and the webhook as well).
#
# The rules deny what a refused member brings: the decisions it acts in, and a
# listener it owns whichever member's sync adds it (else an older member's sync
# would add it for the refused one). Decisions without either are allowed. The
# CCM plans the whole group in every member's sync; when a plan is denied only
# for another member's listeners, that member is left out of this sync and the
# plan is decided again without it, so a refused member does not hold up the
# others and its listener is never added through their syncs; its own sync stays
# denied (docs/shared-load-balancers.md, Policy). Steps that only shrink the load
# balancer (a listener or a target removed) are never denied here, so that a
# refused member can always leave and be cleaned up.
# input.group is null for a Service without the annotation and for routes: then
# none of these rules applies.
package ccm

deny contains {"msg": msg, "code": "group_cross_namespace"} if {
	group_grows
	some member in refused_members
	member.reason == "cross_namespace"
	msg := sprintf("Service %s/%s may not join load balancer group %q: the group lives in namespace %q (recorded on its load balancer when it was created); list the group in data.config.cross_namespace_groups to share it across namespaces, or use a group name of its own", [
		member.namespace, member.name,
		input.group.name,
		input.group.namespace,
	])
}

deny contains {"msg": msg, "code": "group_too_many_members"} if {
	group_grows
	some member in refused_members
	member.reason == "too_many_members"
	msg := sprintf("Service %s/%s may not join load balancer group %q: the group has %d members and at most %d are allowed (data.config.max_group_members); it is member %d by age, use a group or a load balancer of its own", [
		member.namespace, member.name,
		input.group.name,
		count(input.group.members),
		data.config.max_group_members,
		member.position,
	])
}

# group_grows is true for a mutation of a group load balancer that does not
# only shrink it.
group_grows if {
	lb_changes
	is_object(input.group)
	not input.operation in {"delete_service", "remove_target"}
}

# refused_members are the members this decision involves that the rules above
# refuse, each with the reason: the acting Service, and the owner of a listener
# this step adds. A member can be refused for both reasons.
refused_members contains object.union(member, {"reason": "cross_namespace"}) if {
	some member in involved_members
	member.namespace != input.group.namespace
	not input.group.name in data.config.cross_namespace_groups
}

refused_members contains object.union(member, {"reason": "too_many_members"}) if {
	some member in involved_members
	member.position > data.config.max_group_members
}

# involved_members holds each involved member with its position (1 = oldest).
involved_members contains object.union(m, {"position": i + 1}) if {
	some i, m in input.group.members
	m.namespace == input.service.namespace
	m.name == input.service.name
}

involved_members contains object.union(m, {"position": i + 1}) if {
	some i, m in input.group.members
	some port in m.ports
	adds_listener(port)
}

# A listener that this step points at another member (an update_service on a
# port whose owner changed, for example after the member that held it left)
# involves its new owner as much as an added one does.
involved_members contains object.union(m, {"position": i + 1}) if {
	some i, m in input.group.members
	some port in m.ports
	changes_listener(port)
}

# changes_listener(port) is true when this step changes the listener on port.
changes_listener(port) if {
	input.operation == "update_service"
	some svc in input.load_balancer.services
	svc.listen_port == port
	some cur in object.get(input, ["current", "services"], [])
	cur.listen_port == port
	cur != svc
}

deny contains {"msg": msg, "code": "group_name_reserved"} if {
	lb_changes
	prefix := sprintf("%s-group-", [input.cluster.name])
	startswith(input.load_balancer.name, prefix)
	reserved := substring(input.load_balancer.name, count(prefix), -1)
	reserved != ""
	not acting_group(reserved)
	msg := sprintf("load balancer name %q is reserved for load balancer group %q; name the load balancer otherwise (load-balancer.hetzner.cloud/name), or join the group (service.hcloud-policy-ccm.io/load-balancer-group)", [
		input.load_balancer.name,
		reserved,
	])
}

# acting_group(g) is true when the decision is about group g's load balancer.
acting_group(g) if input.group.name == g

# Quotas and cost (docs/policy.md § Quotas and cost), over input.inventory (the
# load balancers this cluster manages before this step, with totals per
# namespace and for the cluster) and input.cost (this step's monthly price
# before and after). Settings in data.config.quotas:
#
# - max_load_balancers_per_namespace: a create in a namespace that already owns
#   that many load balancers is denied;
# - max_per_cluster_by_type: {"lb31": 2} denies a third lb31 in the cluster,
#   by create or by change_type;
# - budget_label: a namespace labelled with it (for example
#   hcloud-policy-ccm.io/monthly-budget=50) may own load balancers costing at
#   most that much a month, net, in the inventory's currency; a step that adds
#   cost beyond it is denied. Steps that lower the cost are never denied;
# - enforcement: "dryrun" (the default here) reports the denials without
#   blocking; set it to "enforce" once the reports look right.
#
# The audit (input.audit) judges an existing load balancer on the inventory it
# met when it was created: the load balancers older than it. So with a limit of
# 2 and three load balancers only the newest is reported, and the same for a
# budget; the messages then say "when this one was created" instead of "now".
#
# A group's load balancer counts in the group's home namespace
# (input.group.namespace). Routes carry no inventory: no rule here applies to
# them. A price the API does not list counts as 0 (its known is false).
package ccm

quotas := object.get(data.config, "quotas", {})

quota_enforcement := object.get(quotas, "enforcement", "dryrun")

# quota_namespace is the namespace a load balancer of this decision counts in.
quota_namespace := input.group.namespace if is_object(input.group)

else := input.service.namespace

# namespace_totals are the totals of quota_namespace before this step.
namespace_totals := object.get(input.inventory.namespaces, quota_namespace, {"load_balancers": 0, "by_type": {}, "monthly_net": 0, "monthly_gross": 0})

deny contains {"msg": msg, "code": "quota_load_balancers_per_namespace", "enforcement": quota_enforcement} if {
	input.action == "loadbalancer.create"
	limit := quotas.max_load_balancers_per_namespace
	namespace_totals.load_balancers >= limit
	msg := sprintf("namespace %q %s and at most %d are allowed (data.config.quotas.max_load_balancers_per_namespace); delete one, or share one with the annotation service.hcloud-policy-ccm.io/load-balancer-group", [
		quota_namespace,
		owned_text(namespace_totals.load_balancers),
		limit,
	])
}

deny contains {"msg": msg, "code": "quota_type_per_cluster", "enforcement": quota_enforcement} if {
	adds_type
	typ := input.load_balancer.type
	limit := quotas.max_per_cluster_by_type[typ]
	have := object.get(input.inventory.cluster.by_type, typ, 0)
	have >= limit
	msg := sprintf("the cluster %s and at most %d are allowed (data.config.quotas.max_per_cluster_by_type); use another type with the annotation load-balancer.hetzner.cloud/type", [
		had_text(have, typ),
		limit,
	])
}

deny contains {"msg": msg, "code": "quota_monthly_budget", "enforcement": quota_enforcement} if {
	input.cost.delta.monthly_net > 0
	amount(namespace_budget)
	budget := to_number(namespace_budget)
	after := namespace_totals.monthly_net + input.cost.delta.monthly_net
	after > budget
	msg := sprintf("namespace %q %s, above its budget of %s (namespace label %s); raise the label or free a load balancer first", [
		quota_namespace,
		cost_text(after, namespace_totals.monthly_net, input.cost.delta.monthly_net),
		namespace_budget,
		quotas.budget_label,
	])
}

deny contains {"msg": msg, "code": "quota_budget_label_invalid", "enforcement": quota_enforcement} if {
	input.cost.delta.monthly_net > 0
	budget := namespace_budget
	not amount(budget)
	msg := sprintf("namespace %q has the label %s=%q, which is not an amount; set it to a number such as 50 or 49.90 (monthly, net, %s)", [
		quota_namespace,
		quotas.budget_label,
		budget,
		input.inventory.currency,
	])
}

# owned_text says how many load balancers the namespace owned before this one:
# now, or (the audit) when this one was created.
owned_text(n) := sprintf("already owned %d load balancers when this one was created", [n]) if input.audit

else := sprintf("already owns %d load balancers", [n])

# had_text is owned_text for the load balancers of type typ in the cluster.
had_text(n, typ) := sprintf("already had %d load balancers of type %q when this one was created", [n, typ]) if input.audit

else := sprintf("already has %d load balancers of type %q", [n, typ])

# cost_text says what the namespace costs with this step: after in total,
# before without it, delta its own price.
cost_text(after, before, delta) := sprintf("costs %s %s a month with this load balancer (%s for the older ones, %s this one)", [
	money(after), input.inventory.currency, money(before), money(delta),
]) if input.audit

else := sprintf("would cost %s %s a month (now %s, this step adds %s)", [
	money(after), input.inventory.currency, money(before), money(delta),
])

# adds_type is true for a decision that brings a load balancer of
# input.load_balancer.type into the cluster: a create, or a change_type from
# another type.
adds_type if input.action == "loadbalancer.create"

adds_type if {
	input.operation == "change_type"
	input.current.type != input.load_balancer.type
}

# namespace_budget is the budget label's value on the namespace of the decision
# (undefined without the label or without data.config.quotas.budget_label). A
# group's load balancer is judged by its home namespace's labels only when the
# acting Service lives there.
namespace_budget := namespace_labels[quotas.budget_label] if quota_namespace == namespace

# amount is true for a string that is a non-negative decimal number.
amount(s) if regex.match(`^[0-9]+(\.[0-9]+)?$`, s)

# money formats a non-negative amount with two decimals. (sprintf's %.2f
# fails on whole numbers, which Rego keeps as integers.)
money(x) := s if {
	cents := round(x * 100)
	s := sprintf("%d.%02d", [floor(cents / 100), cents % 100])
}

# Addresses: routes only inside the cluster CIDR and through gateways in the
# cluster network, load balancer private IPs only in data.config.private_subnets,
# and no loadBalancerSourceRanges (Hetzner load balancers cannot enforce them).
package ccm

deny contains {"msg": msg, "code": "route_outside_cluster_cidr"} if {
	input.action == "route.create"
	not net.cidr_contains(input.cluster.cluster_cidr, input.route.destination)
	msg := sprintf("route destination %s is outside the cluster CIDR %s", [input.route.destination, input.cluster.cluster_cidr])
}

deny contains {"msg": msg, "code": "route_gateway_outside_network"} if {
	input.action == "route.create"
	input.cluster.network != null
	not net.cidr_contains(input.cluster.network.ip_range, input.route.gateway)
	msg := sprintf("route gateway %s is outside the network %s (%s)", [
		input.route.gateway,
		input.cluster.network.name,
		input.cluster.network.ip_range,
	])
}

deny contains {"msg": msg, "code": "private_ip_not_allowed"} if {
	lb_changes
	ip := input.load_balancer.network.private_ip
	ip != ""
	not ip_in_private_subnets(ip)
	msg := sprintf("load balancer private IP %s is outside the allowed subnets (%s); change the annotation load-balancer.hetzner.cloud/private-ipv4", [
		ip,
		concat(", ", data.config.private_subnets),
	])
}

ip_in_private_subnets(ip) if {
	some subnet in data.config.private_subnets
	net.cidr_contains(subnet, ip)
}

deny contains {"msg": msg, "code": "source_ranges_unsupported"} if {
	lb_changes
	ranges := input.service.load_balancer_source_ranges
	is_array(ranges)
	count(ranges) > 0
	msg := sprintf("Service %s/%s sets spec.loadBalancerSourceRanges (%s), which Hetzner load balancers cannot enforce; remove it and restrict access with a Hetzner firewall or a NetworkPolicy", [
		namespace,
		input.service.name,
		concat(", ", ranges),
	])
}

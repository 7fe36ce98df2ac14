# Locations and network zones: EU only (data.config.locations and
# data.config.network_zones).
package ccm

deny contains {"msg": msg, "code": "location_not_allowed"} if {
	lb_changes
	input.load_balancer.location != ""
	not input.load_balancer.location in data.config.locations
	msg := sprintf("location %q is not allowed (allowed: %s); set the annotation load-balancer.hetzner.cloud/location", [
		input.load_balancer.location,
		concat(", ", data.config.locations),
	])
}

deny contains {"msg": msg, "code": "network_zone_not_allowed"} if {
	lb_changes
	input.load_balancer.network_zone != ""
	not input.load_balancer.network_zone in data.config.network_zones
	msg := sprintf("network zone %q is not allowed (allowed: %s); set the annotation load-balancer.hetzner.cloud/network-zone", [
		input.load_balancer.network_zone,
		concat(", ", data.config.network_zones),
	])
}

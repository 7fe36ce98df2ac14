package hcloudemu

import "github.com/hetznercloud/hcloud-go/v2/hcloud/schema"

// defaultLocations are the six locations the official CCM maps to zones.
func defaultLocations() []schema.Location {
	return []schema.Location{
		{ID: 1, Name: "fsn1", Description: "Falkenstein DC Park 1", Country: "DE", City: "Falkenstein", Latitude: 50.47612, Longitude: 12.370071, NetworkZone: "eu-central"},
		{ID: 2, Name: "nbg1", Description: "Nuremberg DC Park 1", Country: "DE", City: "Nuremberg", Latitude: 49.452102, Longitude: 11.076665, NetworkZone: "eu-central"},
		{ID: 3, Name: "hel1", Description: "Helsinki DC Park 1", Country: "FI", City: "Helsinki", Latitude: 60.169855, Longitude: 24.938379, NetworkZone: "eu-central"},
		{ID: 4, Name: "ash", Description: "Ashburn, VA", Country: "US", City: "Ashburn, VA", Latitude: 39.045821, Longitude: -77.487073, NetworkZone: "us-east"},
		{ID: 5, Name: "hil", Description: "Hillsboro, OR", Country: "US", City: "Hillsboro, OR", Latitude: 45.54222, Longitude: -122.951924, NetworkZone: "us-west"},
		{ID: 6, Name: "sin", Description: "Singapore", Country: "SG", City: "Singapore", Latitude: 1.283333, Longitude: 103.833333, NetworkZone: "ap-southeast"},
	}
}

func defaultServerTypes() []schema.ServerType {
	st := func(id int64, name, desc, cpu, arch string, cores int, mem float32, disk int) schema.ServerType {
		return schema.ServerType{
			ID: id, Name: name, Description: desc, Category: "shared", Cores: cores, Memory: mem, Disk: disk,
			StorageType: "local", CPUType: cpu, Architecture: arch,
			Prices: []schema.PricingServerTypePrice{}, Locations: []schema.ServerTypeLocation{},
		}
	}
	ccx := st(96, "ccx13", "CCX13 Dedicated CPU", "dedicated", "x86", 2, 8, 80)
	ccx.Category = "dedicated"
	return []schema.ServerType{
		st(22, "cx22", "CX22", "shared", "x86", 2, 4, 40),
		st(23, "cx32", "CX32", "shared", "x86", 4, 8, 80),
		st(9, "cpx31", "CPX 31", "shared", "x86", 4, 8, 160),
		st(45, "cax11", "CAX11", "shared", "arm", 2, 4, 40),
		ccx,
	}
}

func defaultLoadBalancerTypes() []schema.LoadBalancerType {
	lt := func(id int64, name, desc string, services, targets, conns, certs int) schema.LoadBalancerType {
		return schema.LoadBalancerType{
			ID: id, Name: name, Description: desc, MaxServices: services, MaxTargets: targets,
			MaxConnections: conns, MaxAssignedCertificates: certs, Prices: []schema.PricingLoadBalancerTypePrice{},
		}
	}
	return []schema.LoadBalancerType{
		lt(1, "lb11", "LB11", 5, 25, 10000, 10),
		lt(2, "lb21", "LB21", 15, 75, 20000, 25),
		lt(3, "lb31", "LB31", 30, 150, 40000, 50),
	}
}

package hcloudemu

import (
	"strconv"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

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

// defaultLoadBalancerTypes are the three load balancer types, each priced in every default
// location with PlaceholderMonthlyNet (see there: placeholders, not Hetzner's prices).
func defaultLoadBalancerTypes() []schema.LoadBalancerType {
	lt := func(id int64, name, desc string, services, targets, conns, certs int) schema.LoadBalancerType {
		return schema.LoadBalancerType{
			ID: id, Name: name, Description: desc, MaxServices: services, MaxTargets: targets,
			MaxConnections: conns, MaxAssignedCertificates: certs, Prices: placeholderPrices(name),
		}
	}
	return []schema.LoadBalancerType{
		lt(1, "lb11", "LB11", 5, 25, 10000, 10),
		lt(2, "lb21", "LB21", 15, 75, 20000, 25),
		lt(3, "lb31", "LB31", 30, 150, 40000, 50),
	}
}

// PlaceholderMonthlyNet is the monthly net price, in EUR, the emulator lists for each load
// balancer type in every location unless a seed replaces the type (Seed.LoadBalancerTypes with
// its own prices).
//
// PLACEHOLDERS, NOT HETZNER'S PRICES: round figures so that tests and the demo are priced. Gross
// is net plus PlaceholderVATPercent; hourly is monthly / 500, also a placeholder.
var PlaceholderMonthlyNet = map[string]int{"lb11": 5, "lb21": 10, "lb31": 20}

// PlaceholderVATPercent is the VAT the placeholder gross prices add (placeholder as well).
const PlaceholderVATPercent = 19

// placeholderPrices returns the prices[] entries of a type in every default location.
func placeholderPrices(typ string) []schema.PricingLoadBalancerTypePrice {
	net := float64(PlaceholderMonthlyNet[typ])
	out := []schema.PricingLoadBalancerTypePrice{}
	for _, l := range defaultLocations() {
		out = append(out, schema.PricingLoadBalancerTypePrice{
			Location:          l.Name,
			PriceMonthly:      decimalPrice(net),
			PriceHourly:       decimalPrice(net / 500),
			IncludedTraffic:   1 << 40, // 1 TiB, a placeholder too
			PricePerTBTraffic: decimalPrice(1),
		})
	}
	return out
}

// decimalPrice writes net and gross (net plus PlaceholderVATPercent) as the API's decimal strings.
func decimalPrice(net float64) schema.Price {
	gross := net * (100 + PlaceholderVATPercent) / 100
	return schema.Price{Net: strconv.FormatFloat(net, 'f', 10, 64), Gross: strconv.FormatFloat(gross, 'f', 10, 64)}
}

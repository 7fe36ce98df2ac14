package policy

import (
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// inputValue converts in to the value Rego sees as input. The result equals the JSON encoding
// of in (field names are the json tags of input/input.go; nil pointers, maps and slices are null;
// omitempty fields are left out when zero), built directly: a JSON round trip would cost about
// a third of a decision. TestInputValue keeps the two in step.
func inputValue(in input.Input) (ast.Value, error) {
	items := [][2]*ast.Term{
		ast.Item(ast.InternedTerm("version"), ast.StringTerm(in.Version)),
		ast.Item(ast.InternedTerm("action"), ast.StringTerm(in.Action)),
		ast.Item(ast.InternedTerm("operation"), ast.StringTerm(in.Operation)),
		ast.Item(ast.InternedTerm("cluster"), clusterTerm(in.Cluster)),
		ast.Item(ast.InternedTerm("service"), serviceTerm(in.Service)),
		ast.Item(ast.InternedTerm("load_balancer"), loadBalancerTerm(in.LoadBalancer)),
		ast.Item(ast.InternedTerm("current"), loadBalancerTerm(in.Current)),
		ast.Item(ast.InternedTerm("final"), loadBalancerTerm(in.Final)),
		ast.Item(ast.InternedTerm("route"), routeTerm(in.Route)),
		item("group", groupTerm(in.Group)),
	}
	if in.Target != nil { // omitempty
		items = append(items, ast.Item(ast.InternedTerm("target"), targetTerm(*in.Target)))
	}
	if in.Listener != nil { // omitempty
		items = append(items, item("listener", listenerTerm(*in.Listener)))
	}
	if c := in.Certificate; c != nil { // omitempty
		items = append(items, item("certificate", ast.ObjectTerm(
			item("type", ast.StringTerm(c.Type)),
			item("name", ast.StringTerm(c.Name)),
			item("domains", stringsTerm(c.Domains)),
			item("labels", stringMapTerm(c.Labels)),
		)))
	}
	if in.Audit { // omitempty
		items = append(items, item("audit", ast.BooleanTerm(true)))
	}
	if in.Inventory != nil { // omitempty
		items = append(items, item("inventory", inventoryTerm(*in.Inventory)))
	}
	if c := in.Cost; c != nil { // omitempty
		items = append(items, item("cost", ast.ObjectTerm(
			item("currency", ast.StringTerm(c.Currency)),
			item("before", amountTerm(c.Before)),
			item("after", amountTerm(c.After)),
			item("delta", amountTerm(c.Delta)),
		)))
	}
	return ast.NewObject(items...), nil
}

func item(k string, v *ast.Term) [2]*ast.Term { return ast.Item(ast.InternedTerm(k), v) }

func intTerm[T int | int32 | int64](v T) *ast.Term { return ast.IntNumberTerm(int(v)) }

func clusterTerm(c input.Cluster) *ast.Term {
	var network *ast.Term
	if c.Network == nil {
		network = ast.NullTerm()
	} else {
		network = ast.ObjectTerm(
			item("id", intTerm(c.Network.ID)),
			item("name", ast.StringTerm(c.Network.Name)),
			item("ip_range", ast.StringTerm(c.Network.IPRange)),
		)
	}
	return ast.ObjectTerm(
		item("name", ast.StringTerm(c.Name)),
		item("cluster_cidr", ast.StringTerm(c.ClusterCIDR)),
		item("network", network),
	)
}

func serviceTerm(s *input.Service) *ast.Term {
	if s == nil {
		return ast.NullTerm()
	}
	var ports *ast.Term
	if s.Ports == nil {
		ports = ast.NullTerm()
	} else {
		ts := make([]*ast.Term, len(s.Ports))
		for i, p := range s.Ports {
			ts[i] = ast.ObjectTerm(
				item("name", ast.StringTerm(p.Name)),
				item("protocol", ast.StringTerm(p.Protocol)),
				item("port", intTerm(p.Port)),
				item("node_port", intTerm(p.NodePort)),
			)
		}
		ports = ast.ArrayTerm(ts...)
	}
	return ast.ObjectTerm(
		item("namespace", ast.StringTerm(s.Namespace)),
		item("name", ast.StringTerm(s.Name)),
		item("uid", ast.StringTerm(s.UID)),
		item("labels", stringMapTerm(s.Labels)),
		item("annotations", stringMapTerm(s.Annotations)),
		item("ports", ports),
		item("load_balancer_source_ranges", stringsTerm(s.LoadBalancerSourceRanges)),
		item("external_traffic_policy", ast.StringTerm(s.ExternalTrafficPolicy)),
		item("load_balancer_class", ast.StringTerm(s.LoadBalancerClass)),
		item("namespace_labels", stringMapTerm(s.NamespaceLabels)),
	)
}

func loadBalancerTerm(lb *input.LoadBalancer) *ast.Term {
	if lb == nil {
		return ast.NullTerm()
	}
	items := make([][2]*ast.Term, 0, 14)
	if lb.ID != 0 {
		items = append(items, item("id", intTerm(lb.ID)))
	}
	var network *ast.Term
	if lb.Network == nil {
		network = ast.NullTerm()
	} else {
		network = ast.ObjectTerm(
			item("id", intTerm(lb.Network.ID)),
			item("ip_range", ast.StringTerm(lb.Network.IPRange)),
			item("private_ip", ast.StringTerm(lb.Network.PrivateIP)),
		)
	}
	services := ast.NullTerm()
	if lb.Services != nil {
		ts := make([]*ast.Term, len(lb.Services))
		for i, s := range lb.Services {
			ts[i] = listenerTerm(s)
		}
		services = ast.ArrayTerm(ts...)
	}
	targets := ast.NullTerm()
	if lb.Targets != nil {
		ts := make([]*ast.Term, len(lb.Targets))
		for i, t := range lb.Targets {
			ts[i] = targetTerm(t)
		}
		targets = ast.ArrayTerm(ts...)
	}
	items = append(items,
		item("name", ast.StringTerm(lb.Name)),
		item("type", ast.StringTerm(lb.Type)),
		item("location", ast.StringTerm(lb.Location)),
		item("network_zone", ast.StringTerm(lb.NetworkZone)),
		item("algorithm", ast.StringTerm(lb.Algorithm)),
		item("public_interface", ast.BooleanTerm(lb.PublicInterface)),
		item("ipv6", ast.BooleanTerm(lb.IPv6)),
		item("network", network),
		item("services", services),
		item("targets", targets),
		item("labels", stringMapTerm(lb.Labels)),
		item("protected", ast.BooleanTerm(lb.Protected)),
	)
	return ast.ObjectTerm(items...)
}

// listenerTerm is one LBService.
func listenerTerm(s input.LBService) *ast.Term {
	return ast.ObjectTerm(
		item("protocol", ast.StringTerm(s.Protocol)),
		item("listen_port", intTerm(s.ListenPort)),
		item("destination_port", intTerm(s.DestinationPort)),
		item("proxyprotocol", ast.BooleanTerm(s.Proxyprotocol)),
		item("health_check", healthCheckTerm(s.HealthCheck)),
	)
}

// healthCheckTerm is one LBHealthCheck; unset optional fields are null.
func healthCheckTerm(hc input.LBHealthCheck) *ast.Term {
	http := ast.NullTerm()
	if h := hc.HTTP; h != nil {
		http = ast.ObjectTerm(
			item("domain", stringPtrTerm(h.Domain)),
			item("path", stringPtrTerm(h.Path)),
			item("status_codes", stringsTerm(h.StatusCodes)),
			item("tls", boolPtrTerm(h.TLS)),
		)
	}
	return ast.ObjectTerm(
		item("protocol", ast.StringTerm(hc.Protocol)),
		item("port", intTerm(hc.Port)),
		item("interval", intPtrTerm(hc.Interval)),
		item("timeout", intPtrTerm(hc.Timeout)),
		item("retries", intPtrTerm(hc.Retries)),
		item("http", http),
	)
}

func intPtrTerm(p *int) *ast.Term {
	if p == nil {
		return ast.NullTerm()
	}
	return intTerm(*p)
}

func stringPtrTerm(p *string) *ast.Term {
	if p == nil {
		return ast.NullTerm()
	}
	return ast.StringTerm(*p)
}

func boolPtrTerm(p *bool) *ast.Term {
	if p == nil {
		return ast.NullTerm()
	}
	return ast.BooleanTerm(*p)
}

// targetTerm is one LBTarget; server_id and ip are omitempty.
func targetTerm(t input.LBTarget) *ast.Term {
	kv := [][2]*ast.Term{item("type", ast.StringTerm(t.Type))}
	if t.ServerID != 0 {
		kv = append(kv, item("server_id", intTerm(t.ServerID)))
	}
	if t.IP != "" {
		kv = append(kv, item("ip", ast.StringTerm(t.IP)))
	}
	kv = append(kv, item("use_private_ip", ast.BooleanTerm(t.UsePrivateIP)))
	return ast.ObjectTerm(kv...)
}

func groupTerm(g *input.Group) *ast.Term {
	if g == nil {
		return ast.NullTerm()
	}
	var members *ast.Term
	if g.Members == nil {
		members = ast.NullTerm()
	} else {
		ts := make([]*ast.Term, len(g.Members))
		for i, m := range g.Members {
			ts[i] = ast.ObjectTerm(
				item("namespace", ast.StringTerm(m.Namespace)),
				item("name", ast.StringTerm(m.Name)),
				item("ports", intsTerm(m.Ports)),
			)
		}
		members = ast.ArrayTerm(ts...)
	}
	return ast.ObjectTerm(
		item("name", ast.StringTerm(g.Name)),
		item("namespace", ast.StringTerm(g.Namespace)),
		item("leader", ast.ObjectTerm(
			item("namespace", ast.StringTerm(g.Leader.Namespace)),
			item("name", ast.StringTerm(g.Leader.Name)),
		)),
		item("members", members),
		item("capacity", ast.ObjectTerm(
			item("type", ast.StringTerm(g.Capacity.Type)),
			item("max_services", intTerm(g.Capacity.MaxServices)),
			item("used", intTerm(g.Capacity.Used)),
		)),
	)
}

func inventoryTerm(inv input.Inventory) *ast.Term {
	lbs := ast.NullTerm()
	if inv.LoadBalancers != nil {
		ts := make([]*ast.Term, len(inv.LoadBalancers))
		for i, lb := range inv.LoadBalancers {
			ts[i] = lbTerms.get(lb)
		}
		lbs = ast.ArrayTerm(ts...)
	}
	namespaces := ast.NullTerm()
	if inv.Namespaces != nil {
		kv := make([][2]*ast.Term, 0, len(inv.Namespaces))
		for ns, t := range inv.Namespaces {
			kv = append(kv, ast.Item(ast.StringTerm(ns), totalsTerm(t)))
		}
		namespaces = ast.ObjectTerm(kv...)
	}
	return ast.ObjectTerm(
		item("currency", ast.StringTerm(inv.Currency)),
		item("load_balancers", lbs),
		item("namespaces", namespaces),
		item("cluster", totalsTerm(inv.Cluster)),
	)
}

// maxLBTerms bounds lbTerms: a cluster's inventory, with room for the entries that change.
const maxLBTerms = 4096

// lbTerms keeps the terms of inventory entries. The inventory is most of a load balancer
// input (about 20 terms per load balancer), and the same entries come back decision after
// decision; the entry type is comparable, so a changed entry is another key. It is emptied
// when full. Terms are shared between evaluations as OPA's interned terms are: the evaluator
// never modifies the input (BenchmarkDecide_inventory in ccm/executor measures the effect).
var lbTerms = termCache{m: map[input.InventoryLoadBalancer]*ast.Term{}}

type termCache struct {
	mu sync.Mutex
	m  map[input.InventoryLoadBalancer]*ast.Term
}

func (c *termCache) get(lb input.InventoryLoadBalancer) *ast.Term {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.m[lb]; ok {
		return t
	}
	if len(c.m) >= maxLBTerms {
		clear(c.m)
	}
	t := inventoryLBTerm(lb)
	c.m[lb] = t
	return t
}

// inventoryLBTerm is one InventoryLoadBalancer; id is omitempty.
func inventoryLBTerm(lb input.InventoryLoadBalancer) *ast.Term {
	kv := make([][2]*ast.Term, 0, 10)
	if lb.ID != 0 { // omitempty
		kv = append(kv, item("id", intTerm(lb.ID)))
	}
	return ast.ObjectTerm(append(kv,
		item("name", ast.StringTerm(lb.Name)),
		item("owner", ast.ObjectTerm(
			item("kind", ast.StringTerm(lb.Owner.Kind)),
			item("namespace", ast.StringTerm(lb.Owner.Namespace)),
			item("name", ast.StringTerm(lb.Owner.Name)),
		)),
		item("type", ast.StringTerm(lb.Type)),
		item("location", ast.StringTerm(lb.Location)),
		item("network_zone", ast.StringTerm(lb.NetworkZone)),
		item("listeners", intTerm(lb.Listeners)),
		item("targets", intTerm(lb.Targets)),
		item("price", ast.ObjectTerm(
			item("known", ast.BooleanTerm(lb.Price.Known)),
			item("monthly_net", ast.FloatNumberTerm(lb.Price.MonthlyNet)),
			item("monthly_gross", ast.FloatNumberTerm(lb.Price.MonthlyGross)),
			item("currency", ast.StringTerm(lb.Price.Currency)),
		)),
	)...)
}

func totalsTerm(t input.Totals) *ast.Term {
	byType := ast.NullTerm()
	if t.ByType != nil {
		kv := make([][2]*ast.Term, 0, len(t.ByType))
		for typ, n := range t.ByType {
			kv = append(kv, ast.Item(ast.StringTerm(typ), intTerm(n)))
		}
		byType = ast.ObjectTerm(kv...)
	}
	return ast.ObjectTerm(
		item("load_balancers", intTerm(t.LoadBalancers)),
		item("by_type", byType),
		item("monthly_net", ast.FloatNumberTerm(t.MonthlyNet)),
		item("monthly_gross", ast.FloatNumberTerm(t.MonthlyGross)),
	)
}

func amountTerm(a input.Amount) *ast.Term {
	return ast.ObjectTerm(
		item("monthly_net", ast.FloatNumberTerm(a.MonthlyNet)),
		item("monthly_gross", ast.FloatNumberTerm(a.MonthlyGross)),
	)
}

func intsTerm(vs []int) *ast.Term {
	if vs == nil {
		return ast.NullTerm()
	}
	ts := make([]*ast.Term, len(vs))
	for i, v := range vs {
		ts[i] = intTerm(v)
	}
	return ast.ArrayTerm(ts...)
}

func routeTerm(r *input.Route) *ast.Term {
	if r == nil {
		return ast.NullTerm()
	}
	return ast.ObjectTerm(
		item("destination", ast.StringTerm(r.Destination)),
		item("gateway", ast.StringTerm(r.Gateway)),
		item("node", ast.StringTerm(r.Node)),
	)
}

func stringMapTerm(m map[string]string) *ast.Term {
	if m == nil {
		return ast.NullTerm()
	}
	items := make([][2]*ast.Term, 0, len(m))
	for k, v := range m {
		items = append(items, ast.Item(ast.StringTerm(k), ast.StringTerm(v)))
	}
	return ast.ObjectTerm(items...)
}

func stringsTerm(ss []string) *ast.Term {
	if ss == nil {
		return ast.NullTerm()
	}
	ts := make([]*ast.Term, len(ss))
	for i, s := range ss {
		ts[i] = ast.StringTerm(s)
	}
	return ast.ArrayTerm(ts...)
}

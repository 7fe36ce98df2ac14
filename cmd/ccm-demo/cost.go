package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// demoCost is what the load balancers the CCM created cost a month, priced by the emulator's
// price list (placeholders, not Hetzner's prices: hcloudemu.PlaceholderMonthlyNet).
type demoCost struct {
	inventory input.Inventory
	// err says why there is no price list; the report then says the cost is unknown.
	err error
}

// readPrices reads the emulator's load balancer prices as a client does: GET
// /load_balancer_types, the body inventory.ParsePrices reads (the file `plan --prices` takes).
// Call it after the report's request counts were taken: the emulator counts this request too.
func readPrices(endpoint, token string) (inventory.Prices, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/load_balancer_types", nil)
	if err != nil {
		return inventory.Prices{}, fmt.Errorf("read prices: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return inventory.Prices{}, fmt.Errorf("read prices: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return inventory.Prices{}, fmt.Errorf("read prices: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return inventory.Prices{}, fmt.Errorf("read prices: GET /load_balancer_types: %s", resp.Status)
	}
	return inventory.ParsePrices(body)
}

// costOf prices the load balancers of lbs that the CCM manages (those with the Service UID or
// group label), each owned by its Service in services (by ID) or its group.
func costOf(lbs []schema.LoadBalancer, services []serviceState, p inventory.Prices) input.Inventory {
	owners := map[int64]input.Owner{}
	for _, s := range services {
		if s.lbID != 0 {
			owners[s.lbID] = input.Owner{Kind: inventory.OwnerService, Namespace: s.namespace, Name: s.name}
		}
	}
	var entries []inventory.Entry
	for _, lb := range lbs {
		owner, ok := owners[lb.ID]
		switch group := lb.Labels[lbplan.LabelGroup]; {
		case group != "":
			owner = input.Owner{Kind: inventory.OwnerGroup, Namespace: lb.Labels[lbplan.LabelGroupNamespace], Name: group}
		case !ok && lb.Labels[lbplan.LabelServiceUID] == "":
			continue // not the CCM's: seeded
		}
		entries = append(entries, inventory.Entry{
			ID: lb.ID, Name: lb.Name, Owner: owner, Type: lb.LoadBalancerType.Name,
			Location: lb.Location.Name, NetworkZone: lb.Location.NetworkZone,
			Listeners: len(lb.Services), Targets: len(lb.Targets),
		})
	}
	return inventory.Build(entries, p)
}

// writeCost prints what the CCM's load balancers cost a month.
func writeCost(out io.Writer, c *demoCost) {
	if c == nil {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	p("")
	if c.err != nil {
		p("Monthly cost of the load balancers: unknown (%v)", c.err)
		return
	}
	inv := c.inventory
	p("Monthly cost of the load balancers the CCM created (the emulator's placeholder prices, not Hetzner's)")
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  LOAD BALANCER\tOWNER\tTYPE\tLOCATION\tNET\tGROSS")
	for _, lb := range inv.LoadBalancers {
		net, gross := "unknown", "unknown"
		if lb.Price.Known {
			net, gross = fmt.Sprintf("%.2f", lb.Price.MonthlyNet), fmt.Sprintf("%.2f", lb.Price.MonthlyGross)
		}
		fmt.Fprintf(w, "  %s\t%s %s/%s\t%s\t%s\t%s\t%s\n", lb.Name, lb.Owner.Kind, lb.Owner.Namespace, lb.Owner.Name, lb.Type, lb.Location, net, gross)
	}
	_ = w.Flush()
	p("  total: %d load balancers, %.2f %s net (%.2f gross) a month", inv.Cluster.LoadBalancers, inv.Cluster.MonthlyNet, inv.Currency, inv.Cluster.MonthlyGross)
}

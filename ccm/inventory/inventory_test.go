package inventory_test

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// testPrices are placeholder figures (not Hetzner's prices): lb11 costs 5/5.95 in fsn1 and
// 6/7.14 in hel1 (the dearest of eu-central), lb31 costs 20/23.80 in fsn1.
func testPrices(t *testing.T) inventory.Prices {
	t.Helper()
	p, err := inventory.NewPrices([]inventory.Row{
		{Type: "lb11", Location: "fsn1", MonthlyNet: "5.0000000000", MonthlyGross: "5.9500000000"},
		{Type: "lb11", Location: "hel1", MonthlyNet: "6.0000", MonthlyGross: "7.1400"},
		{Type: "lb11", Location: "nbg1", MonthlyNet: "5.0000", MonthlyGross: "5.9500"},
		{Type: "lb31", Location: "fsn1", MonthlyNet: "20.0000", MonthlyGross: "23.8000"},
		{Type: "lb21", Location: "xyz9", NetworkZone: "moon", MonthlyNet: "0.1", MonthlyGross: "0.2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func svcOwner(ns, name string) input.Owner {
	return input.Owner{Kind: inventory.OwnerService, Namespace: ns, Name: name}
}

func price(net, gross float64) input.Price {
	return input.Price{Known: true, MonthlyNet: net, MonthlyGross: gross, Currency: "EUR"}
}

func TestBuild(t *testing.T) {
	p := testPrices(t)
	tests := []struct {
		name    string
		entries []inventory.Entry
		want    input.Inventory
	}{
		{
			name:    "no load balancers: empty lists and maps, not null",
			entries: nil,
			want: input.Inventory{Currency: "EUR", LoadBalancers: []input.InventoryLoadBalancer{},
				Namespaces: map[string]input.Totals{}, Cluster: input.Totals{ByType: map[string]int{}}},
		},
		{
			name: "sorted by ID, uncreated last; a group counts in its home namespace; totals are exact sums",
			entries: []inventory.Entry{
				{Name: "new", Owner: svcOwner("a", "n"), Type: "lb11", Location: "fsn1"},
				{ID: 9, Name: "g", Owner: input.Owner{Kind: inventory.OwnerGroup, Namespace: "a", Name: "shared"}, Type: "lb31", Location: "fsn1", Listeners: 2, Targets: 3},
				{ID: 2, Name: "b", Owner: svcOwner("b", "web"), Type: "lb11", Location: "hel1", NetworkZone: "eu-central", Listeners: 1, Targets: 1},
			},
			want: input.Inventory{
				Currency: "EUR",
				LoadBalancers: []input.InventoryLoadBalancer{
					{ID: 2, Name: "b", Owner: svcOwner("b", "web"), Type: "lb11", Location: "hel1", NetworkZone: "eu-central", Listeners: 1, Targets: 1, Price: price(6, 7.14)},
					{ID: 9, Name: "g", Owner: input.Owner{Kind: "group", Namespace: "a", Name: "shared"}, Type: "lb31", Location: "fsn1", Listeners: 2, Targets: 3, Price: price(20, 23.8)},
					{Name: "new", Owner: svcOwner("a", "n"), Type: "lb11", Location: "fsn1", Price: price(5, 5.95)},
				},
				Namespaces: map[string]input.Totals{
					"a": {LoadBalancers: 2, ByType: map[string]int{"lb11": 1, "lb31": 1}, MonthlyNet: 25, MonthlyGross: 29.75},
					"b": {LoadBalancers: 1, ByType: map[string]int{"lb11": 1}, MonthlyNet: 6, MonthlyGross: 7.14},
				},
				Cluster: input.Totals{LoadBalancers: 3, ByType: map[string]int{"lb11": 2, "lb31": 1}, MonthlyNet: 31, MonthlyGross: 36.89},
			},
		},
		{
			name: "a network zone only is priced at the zone's dearest location; an unknown type or location is known: false",
			entries: []inventory.Entry{
				{ID: 1, Name: "z", Owner: svcOwner("a", "z"), Type: "lb11", NetworkZone: "eu-central"},
				{ID: 2, Name: "u", Owner: svcOwner("a", "u"), Type: "lb21", Location: "fsn1"},
				{ID: 3, Name: "m", Owner: svcOwner("a", "m"), Type: "lb21", NetworkZone: "moon"},
			},
			want: input.Inventory{
				Currency: "EUR",
				LoadBalancers: []input.InventoryLoadBalancer{
					{ID: 1, Name: "z", Owner: svcOwner("a", "z"), Type: "lb11", NetworkZone: "eu-central", Price: price(6, 7.14)},
					{ID: 2, Name: "u", Owner: svcOwner("a", "u"), Type: "lb21", Location: "fsn1", Price: input.Price{Currency: "EUR"}},
					{ID: 3, Name: "m", Owner: svcOwner("a", "m"), Type: "lb21", NetworkZone: "moon", Price: price(0.1, 0.2)},
				},
				Namespaces: map[string]input.Totals{
					"a": {LoadBalancers: 3, ByType: map[string]int{"lb11": 1, "lb21": 2}, MonthlyNet: 6.1, MonthlyGross: 7.34},
				},
				Cluster: input.Totals{LoadBalancers: 3, ByType: map[string]int{"lb11": 1, "lb21": 2}, MonthlyNet: 6.1, MonthlyGross: 7.34},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := append([]inventory.Entry(nil), tt.entries...)
			got := inventory.Build(tt.entries, p)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("Build (-want +got):\n%s", d)
			}
			if d := cmp.Diff(before, tt.entries); d != "" {
				t.Errorf("Build modified its entries (-before +after):\n%s", d)
			}
		})
	}
}

func TestBuild_unknownPricesWithZeroPrices(t *testing.T) {
	got := inventory.Build([]inventory.Entry{{ID: 1, Name: "x", Type: "lb11", Location: "fsn1"}}, inventory.Prices{})
	if got.LoadBalancers[0].Price != (input.Price{Currency: "EUR"}) || got.Cluster.LoadBalancers != 1 {
		t.Errorf("Build with no prices = %+v, want one load balancer priced unknown", got)
	}
}

func TestStepCost(t *testing.T) {
	p := testPrices(t)
	lb := func(typ, loc string) *input.LoadBalancer { return &input.LoadBalancer{Type: typ, Location: loc} }
	amt := func(net, gross float64) input.Amount { return input.Amount{MonthlyNet: net, MonthlyGross: gross} }
	tests := []struct {
		name          string
		before, after *input.LoadBalancer
		want          input.Cost
	}{
		{"create: before is 0", nil, lb("lb11", "fsn1"), input.Cost{Currency: "EUR", After: amt(5, 5.95), Delta: amt(5, 5.95)}},
		{"delete: after is 0, the delta negative", lb("lb31", "fsn1"), nil, input.Cost{Currency: "EUR", Before: amt(20, 23.8), Delta: amt(-20, -23.8)}},
		{"change_type to a dearer type", lb("lb11", "fsn1"), lb("lb31", "fsn1"), input.Cost{Currency: "EUR", Before: amt(5, 5.95), After: amt(20, 23.8), Delta: amt(15, 17.85)}},
		{"an update that keeps the type: delta 0", lb("lb11", "fsn1"), lb("lb11", "fsn1"), input.Cost{Currency: "EUR", Before: amt(5, 5.95), After: amt(5, 5.95)}},
		{"unknown price counts as 0", nil, lb("lb21", "fsn1"), input.Cost{Currency: "EUR"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, inventory.StepCost(tt.before, tt.after, p)); d != "" {
				t.Errorf("StepCost (-want +got):\n%s", d)
			}
		})
	}
}

func TestAddsCost(t *testing.T) {
	p := testPrices(t)
	lb := func(typ string) *input.LoadBalancer { return &input.LoadBalancer{Type: typ, Location: "fsn1"} }
	tests := []struct {
		name string
		in   input.Input
		want bool
	}{
		{"create", input.Input{Action: input.ActionLoadBalancerCreate, LoadBalancer: lb("lb11")}, true},
		{"audit create", input.Input{Action: input.ActionLoadBalancerCreate, LoadBalancer: lb("lb11"), Audit: true}, false},
		{"change_type up", input.Input{Action: input.ActionLoadBalancerUpdate, Operation: "change_type", Current: lb("lb11"), LoadBalancer: lb("lb31")}, true},
		{"change_type down", input.Input{Action: input.ActionLoadBalancerUpdate, Operation: "change_type", Current: lb("lb31"), LoadBalancer: lb("lb11")}, false},
		{"change_type to a type without price", input.Input{Action: input.ActionLoadBalancerUpdate, Operation: "change_type", Current: lb("lb31"), LoadBalancer: lb("lb21")}, true},
		{"add_service", input.Input{Action: input.ActionLoadBalancerUpdate, Operation: "add_service", Current: lb("lb11"), LoadBalancer: lb("lb11")}, false},
		{"delete", input.Input{Action: input.ActionLoadBalancerDelete, Current: lb("lb11")}, false},
		{"route", input.Input{Action: input.ActionRouteCreate, Route: &input.Route{}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := inventory.AddsCost(tt.in, p); got != tt.want {
				t.Errorf("AddsCost = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestApply(t *testing.T) {
	p := testPrices(t)
	base := []inventory.Entry{
		{ID: 1, Name: "one", Owner: svcOwner("a", "one"), Type: "lb11", Location: "fsn1", Listeners: 1, Targets: 2},
		{ID: 2, Name: "two", Owner: svcOwner("b", "two"), Type: "lb11", Location: "fsn1"},
	}
	inv := inventory.Build(base, p)
	withoutOne := inventory.Build(base[1:], p)
	tests := []struct {
		name string
		in   input.Input
		want input.Inventory
	}{
		{
			name: "a create adds the Service's load balancer",
			in: input.Input{Action: input.ActionLoadBalancerCreate, Service: &input.Service{Namespace: "a", Name: "new"},
				LoadBalancer: &input.LoadBalancer{Name: "new", Type: "lb31", Location: "fsn1", Services: make([]input.LBService, 2), Targets: make([]input.LBTarget, 1)}},
			want: inventory.Build(append(base[:2:2], inventory.Entry{Name: "new", Owner: svcOwner("a", "new"), Type: "lb31", Location: "fsn1", Listeners: 2, Targets: 1}), p),
		},
		{
			name: "a group's create is owned by the group in its home namespace",
			in: input.Input{Action: input.ActionLoadBalancerCreate, Service: &input.Service{Namespace: "c", Name: "m"},
				Group: &input.Group{Name: "shared", Namespace: "a"}, LoadBalancer: &input.LoadBalancer{Name: "g", Type: "lb11", Location: "fsn1"}},
			want: inventory.Build(append(base[:2:2], inventory.Entry{Name: "g", Owner: input.Owner{Kind: "group", Namespace: "a", Name: "shared"}, Type: "lb11", Location: "fsn1"}), p),
		},
		{
			name: "a delete removes the load balancer by ID",
			in:   input.Input{Action: input.ActionLoadBalancerDelete, Current: &input.LoadBalancer{ID: 1, Name: "renamed"}},
			want: withoutOne,
		},
		{
			name: "change_type retypes by ID and keeps the owner",
			in: input.Input{Action: input.ActionLoadBalancerUpdate, Operation: "change_type",
				Current:      &input.LoadBalancer{ID: 1, Name: "one", Type: "lb11", Location: "fsn1"},
				LoadBalancer: &input.LoadBalancer{ID: 1, Name: "one", Type: "lb31", Location: "fsn1", Services: make([]input.LBService, 1), Targets: make([]input.LBTarget, 2)}},
			want: inventory.Build([]inventory.Entry{{ID: 1, Name: "one", Owner: svcOwner("a", "one"), Type: "lb31", Location: "fsn1", Listeners: 1, Targets: 2}, base[1]}, p),
		},
		{
			name: "a delete found by name when the step has no ID",
			in:   input.Input{Action: input.ActionLoadBalancerDelete, Current: &input.LoadBalancer{Name: "one"}},
			want: withoutOne,
		},
		{
			name: "a load balancer not in the inventory: unchanged",
			in:   input.Input{Action: input.ActionLoadBalancerDelete, Current: &input.LoadBalancer{ID: 7, Name: "x"}},
			want: inv,
		},
		{
			name: "an audit decision changes nothing",
			in:   input.Input{Action: input.ActionLoadBalancerCreate, Audit: true, LoadBalancer: &input.LoadBalancer{Name: "x", Type: "lb11"}},
			want: inv,
		},
		{
			name: "a route changes nothing",
			in:   input.Input{Action: input.ActionRouteCreate, Route: &input.Route{}},
			want: inv,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := inventory.Build(base, p)
			got := inventory.Apply(inv, tt.in, p)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("Apply (-want +got):\n%s", d)
			}
			if d := cmp.Diff(before, inv); d != "" {
				t.Errorf("Apply modified its inventory (-before +after):\n%s", d)
			}
		})
	}
}

func TestWithout(t *testing.T) {
	p := testPrices(t)
	group := input.Owner{Kind: inventory.OwnerGroup, Namespace: "a", Name: "shared"}
	base := []inventory.Entry{
		{ID: 1, Name: "one", Owner: svcOwner("a", "one"), Type: "lb11", Location: "fsn1"},
		{ID: 2, Name: "g", Owner: group, Type: "lb31", Location: "fsn1"},
	}
	inv := inventory.Build(base, p)
	if d := cmp.Diff(inventory.Build(base[1:], p), inventory.Without(inv, svcOwner("a", "one"), p)); d != "" {
		t.Errorf("Without a Service (-want +got):\n%s", d)
	}
	if d := cmp.Diff(inventory.Build(base[:1], p), inventory.Without(inv, group, p)); d != "" {
		t.Errorf("Without a group (-want +got):\n%s", d)
	}
	if d := cmp.Diff(inv, inventory.Without(inv, svcOwner("b", "one"), p)); d != "" {
		t.Errorf("Without an owner of none (-want +got):\n%s", d)
	}
}

// TestOlderThan: the inventory a load balancer met when it was created holds the load
// balancers created before it: by created time when both are known (also against the IDs), by
// ID otherwise; a group counts by its oldest load balancer; an owner without one is Without.
func TestOlderThan(t *testing.T) {
	p := testPrices(t)
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	group := input.Owner{Kind: inventory.OwnerGroup, Namespace: "a", Name: "shared"}
	entry := func(id int64, owner input.Owner) inventory.Entry {
		return inventory.Entry{ID: id, Name: fmt.Sprint("lb", id), Owner: owner, Type: "lb11", Location: "fsn1"}
	}
	base := []inventory.Entry{entry(1, svcOwner("a", "one")), entry(2, svcOwner("a", "two")), entry(3, svcOwner("a", "three")), entry(4, group)}
	inv := inventory.Build(base, p)
	tests := []struct {
		name  string
		owner input.Owner
		ages  map[int64]time.Time
		want  []int64 // IDs of the inventory returned
	}{
		{name: "by ID without created times: the first", owner: svcOwner("a", "one"), want: nil},
		{name: "by ID without created times: the third", owner: svcOwner("a", "three"), want: []int64{1, 2}},
		{name: "created times before IDs", owner: svcOwner("a", "one"),
			ages: map[int64]time.Time{1: t0.Add(time.Hour), 2: t0, 3: t0.Add(2 * time.Hour), 4: t0.Add(3 * time.Hour)}, want: []int64{2}},
		{name: "equal created times: by ID", owner: svcOwner("a", "two"),
			ages: map[int64]time.Time{1: t0, 2: t0, 3: t0, 4: t0}, want: []int64{1}},
		{name: "a group", owner: group, want: []int64{1, 2, 3}},
		{name: "an owner without a load balancer: Without", owner: svcOwner("b", "none"), want: []int64{1, 2, 3, 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := inventory.OlderThan(inv, tc.owner, tc.ages, p)
			var ids []int64
			for _, lb := range got.LoadBalancers {
				ids = append(ids, lb.ID)
			}
			if !slices.Equal(ids, tc.want) || got.Cluster.LoadBalancers != len(tc.want) {
				t.Errorf("OlderThan = %v (cluster counts %d), want %v", ids, got.Cluster.LoadBalancers, tc.want)
			}
		})
	}
}

func TestParsePrices(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantErr string // "" for success
		lb      *input.LoadBalancer
		want    input.Amount
	}{
		{
			name: "the body of GET /load_balancer_types",
			body: `{"load_balancer_types":[{"id":1,"name":"lb11","prices":[{"location":"fsn1","price_hourly":{"net":"0.1","gross":"0.1"},"price_monthly":{"net":"5.0000000000","gross":"5.9500000000000000"}}]}],"meta":{}}`,
			lb:   &input.LoadBalancer{Type: "lb11", Location: "fsn1"},
			want: input.Amount{MonthlyNet: 5, MonthlyGross: 5.95},
		},
		{name: "not JSON", body: `lb11: 5`, wantErr: "want the JSON body of GET /load_balancer_types"},
		{name: "another endpoint's body", body: `{"servers":[]}`, wantErr: `no "load_balancer_types" list`},
		{name: "a price that is not a number", body: `{"load_balancer_types":[{"name":"lb11","prices":[{"location":"fsn1","price_monthly":{"net":"five","gross":"5"}}]}]}`,
			wantErr: `row 0 (lb11 at fsn1): price_monthly.net: "five" is not a decimal number`},
		{name: "a negative price", body: `{"load_balancer_types":[{"name":"lb11","prices":[{"location":"fsn1","price_monthly":{"net":"1","gross":"-5"}}]}]}`,
			wantErr: `price_monthly.gross: "-5" is out of range`},
		{name: "a price without location", body: `{"load_balancer_types":[{"name":"lb11","prices":[{"price_monthly":{"net":"1","gross":"1"}}]}]}`,
			wantErr: "type and location must not be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := inventory.ParsePrices([]byte(tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParsePrices error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := inventory.StepCost(nil, tt.lb, p).After; got != tt.want {
				t.Errorf("price = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestInventoryIsALeaf fails when package inventory imports anything but policy/input and the
// standard library: `plan` and the webhook link it, and it must stay pure.
func TestInventoryIsALeaf(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch pkg {
		case "github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory", "github.com/policy-ccm/hcloud-policy-ccm/policy/input":
		default:
			t.Errorf("package inventory links %s; it may import policy/input and the standard library only", pkg)
		}
	}
}

// BenchmarkBuild builds the inventory of 200 load balancers in 20 namespaces: what the gate
// does once per plan (loadbalancer's Pricing) before the plan's inputs are built.
func BenchmarkBuild(b *testing.B) {
	p, err := inventory.NewPrices([]inventory.Row{{Type: "lb11", Location: "fsn1", MonthlyNet: "5", MonthlyGross: "5.95"}}) // placeholders
	if err != nil {
		b.Fatal(err)
	}
	entries := make([]inventory.Entry, 200)
	for i := range entries {
		entries[i] = inventory.Entry{ID: int64(200 - i), Name: "lb", Type: "lb11", Location: "fsn1", Owner: svcOwner(string(rune('a'+i%20)), "svc")}
	}
	b.ReportAllocs()
	for b.Loop() {
		if inv := inventory.Build(entries, p); inv.Cluster.LoadBalancers != 200 {
			b.Fatalf("built %d load balancers, want 200", inv.Cluster.LoadBalancers)
		}
	}
}

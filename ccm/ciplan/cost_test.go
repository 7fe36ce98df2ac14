package ciplan

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// quotaEngine loads the example quota rules (examples/policies/quotas.rego and the lib.rego
// it uses) with the quotas of data.config, enforced.
func quotaEngine(t *testing.T, quotas string) *policy.Engine {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"lib.rego", "quotas.rego"} {
		b, err := os.ReadFile(filepath.Join(examplePolicies, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return loadWithData(t, dir, `{"config": {"quotas": `+quotas+`}}`)
}

// loadWithData writes data as dir's data.json and returns an engine with dir loaded.
func loadWithData(t *testing.T, dir, data string) *policy.Engine {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "data.json"), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	files, err := policy.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := policy.NewEngine(policy.Options{})
	if _, err := e.Load(context.Background(), files, policy.DirSource(dir)); err != nil {
		t.Fatal(err)
	}
	return e
}

func testPrices(t *testing.T) inventory.Prices {
	t.Helper()
	p, err := ReadPrices("../../examples/emulator/load_balancer_types.json")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// teamA reads testdata/team-a.yaml, four lb11 Services in namespace team-a, with the
// namespace labelled nsLabels.
func teamA(t *testing.T, nsLabels map[string]string) Manifests {
	t.Helper()
	m, err := ReadManifests([]string{"testdata/team-a.yaml"}, nil)
	if err != nil || len(m.Problems) > 0 {
		t.Fatalf("read: %v %v", err, m.Problems)
	}
	m.Namespaces = map[string]map[string]string{"team-a": nsLabels}
	return m
}

// verdicts is name=allowed|denied per Service.
func verdicts(r Report) string {
	var out []string
	for _, s := range r.Services {
		v := "allowed"
		if !s.Allowed {
			v = "denied"
		}
		out = append(out, s.Name+"="+v)
	}
	return strings.Join(out, " ")
}

// TestRun_Quotas: without a state, the plan's own creates are the inventory, in manifest
// order, so the quota and budget rules deny exactly the Services that cross them.
func TestRun_Quotas(t *testing.T) {
	tests := []struct {
		name     string
		quotas   string
		nsLabels map[string]string
		want     string
		// wantText are lines of the text output.
		wantText []string
	}{
		{
			name:   "four Services under a quota of 3: exactly the fourth is denied",
			quotas: `{"enforcement": "enforce", "max_load_balancers_per_namespace": 3}`,
			want:   "one=allowed two=allowed three=allowed four=denied",
			wantText: []string{
				`deny: namespace "team-a" already owns 3 load balancers and at most 3 are allowed`,
				"  cost: +5.00 EUR/month net (+5.95 gross), 5.00 EUR/month net (5.95 gross) after (denied: not applied)",
				"cost of every managed load balancer: +15.00 EUR/month net (+17.85 gross), 15.00 EUR/month net (17.85 gross) after",
			},
		},
		{
			name:     "a budget of 12 a month: the third lb11 at 5 crosses it",
			quotas:   `{"enforcement": "enforce", "budget_label": "hcloud-policy-ccm.io/monthly-budget"}`,
			nsLabels: map[string]string{"hcloud-policy-ccm.io/monthly-budget": "12"},
			want:     "one=allowed two=allowed three=denied four=denied",
			wantText: []string{
				`deny: namespace "team-a" would cost 15.00 EUR a month (now 10.00, this step adds 5.00), above its budget of 12 (namespace label hcloud-policy-ccm.io/monthly-budget)`,
				"  cost: +5.00 EUR/month net (+5.95 gross), 5.00 EUR/month net (5.95 gross) after (denied: not applied)",
				"cost of every managed load balancer: +10.00 EUR/month net (+11.90 gross), 10.00 EUR/month net (11.90 gross) after",
			},
		},
		{
			name:   "in dry run (the example's default) every Service runs and the denial is reported",
			quotas: `{"max_load_balancers_per_namespace": 3}`,
			want:   "one=allowed two=allowed three=allowed four=allowed",
			wantText: []string{
				`dry run: namespace "team-a" already owns 3 load balancers`,
				"cost of every managed load balancer: +20.00 EUR/month net (+23.80 gross), 20.00 EUR/month net (23.80 gross) after",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Run(context.Background(), teamA(t, tt.nsLabels), Options{Config: config.Default(), Decider: quotaEngine(t, tt.quotas), Prices: testPrices(t)})
			if got := verdicts(r); got != tt.want {
				t.Fatalf("verdicts %s, want %s", got, tt.want)
			}
			var b bytes.Buffer
			if err := r.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			for _, line := range tt.wantText {
				if !strings.Contains(b.String(), line) {
					t.Errorf("text output lacks %q:\n%s", line, b.String())
				}
			}
		})
	}
}

// TestRun_CostJSON: -o json carries the cost of each Service and the total, as the text does.
func TestRun_CostJSON(t *testing.T) {
	e := quotaEngine(t, `{"enforcement": "enforce", "max_load_balancers_per_namespace": 3}`)
	r := Run(context.Background(), teamA(t, nil), Options{Config: config.Default(), Decider: e, Prices: testPrices(t)})
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Cost     Cost `json:"cost"`
		Services []struct {
			Name    string `json:"name"`
			Allowed bool   `json:"allowed"`
			Cost    Cost   `json:"cost"`
		} `json:"services"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if c := got.Cost; !c.Known || c.Currency != "EUR" || c.Before.MonthlyNet != 0 || c.After.MonthlyNet != 15 || c.Delta.MonthlyGross != 17.85 {
		t.Errorf("total cost %+v, want known EUR 0 -> 15 net, +17.85 gross", c)
	}
	four := got.Services[3]
	if four.Name != "four" || four.Allowed || !four.Cost.Known || four.Cost.Delta.MonthlyNet != 5 || four.Cost.After.MonthlyGross != 5.95 {
		t.Errorf("Service four %+v, want denied with a known delta of 5 net, 5.95 gross after", four)
	}
}

// TestRun_CostUnknown: without prices, or for a location the prices do not list, the cost is
// unknown (no made-up number), and the quota on counts still holds.
func TestRun_CostUnknown(t *testing.T) {
	e := quotaEngine(t, `{"enforcement": "enforce", "max_load_balancers_per_namespace": 3}`)
	hel1, err := inventory.ParsePrices([]byte(`{"load_balancer_types": [{"name": "lb11", "prices": [{"location": "hel1", "price_monthly": {"net": "5", "gross": "5.95"}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		prices inventory.Prices
		want   string
	}{
		{"no prices", inventory.Prices{}, "cost: unknown (no prices: pass --prices FILE or --from-api)"},
		{"no price for fsn1", hel1, "cost: unknown (the prices list none for a load balancer's type and location)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := Run(context.Background(), teamA(t, nil), Options{Config: config.Default(), Decider: e, Prices: tt.prices})
			if got := verdicts(r); got != "one=allowed two=allowed three=allowed four=denied" {
				t.Errorf("verdicts %s: the quota on counts needs no price", got)
			}
			if r.Cost.Known || r.Services[0].Cost.Known {
				t.Errorf("cost known without a price: %+v", r.Cost)
			}
			var b bytes.Buffer
			if err := r.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), tt.want) || strings.Contains(b.String(), "EUR") {
				t.Errorf("text output lacks %q or names an amount:\n%s", tt.want, b.String())
			}
		})
	}
}

// TestRun_StateIsInventory: with a state, its load balancers are the inventory: two existing
// ones in team-a (owned by their Services, matched by UID) leave room for one more under a
// quota of 3, and the existing ones are priced in the total.
func TestRun_StateIsInventory(t *testing.T) {
	e := quotaEngine(t, `{"enforcement": "enforce", "max_load_balancers_per_namespace": 3}`)
	p := testPrices(t)
	m := teamA(t, nil)
	two := Manifests{Services: m.Services[:2], Namespaces: m.Namespaces}
	first := Run(context.Background(), two, Options{Config: config.Default(), Decider: e, Prices: p})
	st := first.After(State{})
	r := Run(context.Background(), m, Options{Config: config.Default(), Decider: e, Prices: p, State: st})
	if got := verdicts(r); got != "one=allowed two=allowed three=allowed four=denied" {
		t.Errorf("verdicts %s, want the fourth denied", got)
	}
	if c := r.Cost; c.Before.MonthlyNet != 10 || c.After.MonthlyNet != 15 || c.Delta.MonthlyNet != 5 {
		t.Errorf("total cost %+v, want 10 -> 15 net", c)
	}
}

// TestReadPrices_BadFile: a --prices file that is not the JSON of GET /load_balancer_types is
// an error naming the flag and the file.
func TestReadPrices_BadFile(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ name, body, want string }{
		{"not JSON", `{`, "--prices"},
		{"no list", `{"load_balancers": []}`, `no "load_balancer_types" list`},
		{"bad amount", `{"load_balancer_types": [{"name": "lb11", "prices": [{"location": "fsn1", "price_monthly": {"net": "five", "gross": "5"}}]}]}`, `"five" is not a decimal number`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".json")
			if err := os.WriteFile(path, []byte(tt.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := ReadPrices(path)
			if err == nil || !strings.Contains(err.Error(), "--prices "+path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one naming --prices %s and %q", err, path, tt.want)
			}
		})
	}
}

// TestExamplePricesAreTheEmulators: examples/emulator/load_balancer_types.json (the --prices
// file of the docs and these tests) prices each type and location it lists as the emulator
// does, read with --from-api: both are the same placeholders.
func TestExamplePricesAreTheEmulators(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t)
	api, err := PricesFromAPI(context.Background(), config.HCloud{Token: emu.Token(), Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	file := testPrices(t)
	var entries []inventory.Entry
	for _, typ := range []string{"lb11", "lb21", "lb31"} {
		for _, loc := range []string{"fsn1", "nbg1", "hel1"} {
			entries = append(entries, inventory.Entry{Name: typ + "@" + loc, Type: typ, Location: loc})
		}
	}
	want, got := inventory.Build(entries, api), inventory.Build(entries, file)
	for i, w := range want.LoadBalancers {
		if g := got.LoadBalancers[i]; !w.Price.Known || g.Price != w.Price {
			t.Errorf("%s: file %+v, emulator %+v", w.Name, g.Price, w.Price)
		}
	}
}

// TestRun_TotalUnknownWithoutPrices: without prices the total is unknown even when no load
// balancer exists or is created (no "+0.00" made up), and known with prices.
func TestRun_TotalUnknownWithoutPrices(t *testing.T) {
	e := quotaEngine(t, `{}`)
	for _, tt := range []struct {
		name   string
		prices inventory.Prices
		want   bool
	}{
		{"no prices", inventory.Prices{}, false},
		{"prices", testPrices(t), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := Run(context.Background(), Manifests{}, Options{Config: config.Default(), Decider: e, Prices: tt.prices})
			if r.Cost.Known != tt.want || r.Cost.After.MonthlyNet != 0 {
				t.Errorf("total %+v, want known=%t and 0", r.Cost, tt.want)
			}
		})
	}
}

// TestNewCosts: the state's load balancers the CCM manages are the inventory, each with its
// owner: a Service's by the UID label (the Service of the manifests with that UID, or namespace
// "" for one the manifests lack), a group's by its labels; one without either is not the
// CCM's and is left out.
func TestNewCosts(t *testing.T) {
	m := teamA(t, nil)
	uid := string(WithAPIDefaults(m.Services[0].Service).UID)
	lb := func(id int64, name string, labels map[string]string) *hcloud.LoadBalancer {
		return &hcloud.LoadBalancer{ID: id, Name: name, Labels: labels,
			LoadBalancerType: &hcloud.LoadBalancerType{Name: "lb11"}, Location: &hcloud.Location{Name: "fsn1", NetworkZone: "eu-central"}}
	}
	st := State{LoadBalancers: []*hcloud.LoadBalancer{
		lb(1, "one", map[string]string{lbplan.LabelServiceUID: uid}),
		lb(2, "gone", map[string]string{lbplan.LabelServiceUID: "uid-of-a-service-not-in-the-manifests"}),
		lb(3, "shared", map[string]string{lbplan.LabelGroup: "web", lbplan.LabelGroupNamespace: "shop", lbplan.LabelCluster: "k"}),
		lb(4, "by-hand", nil),
	}}
	inv := newCosts(st, m, testPrices(t)).inv
	var got []string
	for _, e := range inv.LoadBalancers {
		got = append(got, fmt.Sprintf("%s=%s:%s/%s", e.Name, e.Owner.Kind, e.Owner.Namespace, e.Owner.Name))
	}
	if want := "one=service:team-a/one gone=service:/ shared=group:shop/web"; strings.Join(got, " ") != want {
		t.Errorf("inventory %s, want %s", strings.Join(got, " "), want)
	}
	if inv.Cluster.MonthlyNet != 15 || inv.Namespaces["team-a"].LoadBalancers != 1 || inv.Namespaces["shop"].LoadBalancers != 1 {
		t.Errorf("totals %+v / %+v, want 15 a month, one each in team-a and shop", inv.Cluster, inv.Namespaces)
	}
}

package admission_test

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/admission"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// TestReview_Cost: with Config.Pricing, every decided input carries the inventory and the cost
// (as the gate's), and a change that creates, deletes or retypes a load balancer is admitted
// with a warning naming its monthly cost; a denied one carries the warning too.
func TestReview_Cost(t *testing.T) {
	prices, err := inventory.NewPrices([]inventory.Row{
		{Type: "lb11", Location: "fsn1", MonthlyNet: "5", MonthlyGross: "5.95"},
		{Type: "lb31", Location: "fsn1", MonthlyNet: "20", MonthlyGross: "23.80"},
	})
	if err != nil {
		t.Fatal(err)
	}
	owned := inventory.Build([]inventory.Entry{{ID: 42, Name: "lb-web", Type: "lb11", Location: "fsn1", Owner: input.Owner{Kind: inventory.OwnerService, Namespace: "shop", Name: "web"}}}, prices)
	cases := []struct {
		name    string
		req     *admissionv1.AdmissionRequest
		hasLB   bool
		deny    map[string]string
		pricing *lbplan.Pricing
		// want is the cost warning ("" for none).
		want string
	}{
		{
			name: "a create adds the type's price", req: request(admissionv1.Create, service("web"), nil),
			pricing: &lbplan.Pricing{Prices: prices},
			want:    admission.WarningPrefix + "monthly cost of this change: +5.00 EUR net (+5.95 gross); the load balancer then costs 5.00 EUR net (5.95 gross) a month",
		},
		{
			name: "a change to lb31 adds the difference", hasLB: true,
			req:     request(admissionv1.Update, service("web", withAnnotation(string(annotation.LBType), "lb31")), service("web")),
			pricing: &lbplan.Pricing{Inventory: owned, Prices: prices},
			want:    admission.WarningPrefix + "monthly cost of this change: +15.00 EUR net (+17.85 gross); the load balancer then costs 20.00 EUR net (23.80 gross) a month",
		},
		{
			name: "leaving type LoadBalancer deletes the load balancer and its cost", hasLB: true,
			req:     request(admissionv1.Update, service("web", clusterIP), service("web")),
			pricing: &lbplan.Pricing{Inventory: owned, Prices: prices},
			want:    admission.WarningPrefix + "monthly cost of this change: -5.00 EUR net (-5.95 gross); the load balancer then costs 0.00 EUR net (0.00 gross) a month",
		},
		{
			name: "a denied create names its cost too", req: request(admissionv1.Create, service("web"), nil),
			deny:    map[string]string{"create": "over budget"},
			pricing: &lbplan.Pricing{Prices: prices},
			want:    "monthly cost of this change: +5.00 EUR net",
		},
		{
			name: "a listener change costs nothing: no warning", hasLB: true,
			req:     request(admissionv1.Update, service("web", withAnnotation(string(annotation.LBAlgorithmType), "least_connections")), service("web")),
			pricing: &lbplan.Pricing{Inventory: owned, Prices: prices},
		},
		{
			name: "a location without a price is unknown", req: request(admissionv1.Create, service("web", withAnnotation(string(annotation.LBLocation), "hel1")), nil),
			pricing: &lbplan.Pricing{Prices: prices},
			want:    admission.WarningPrefix + "monthly cost of this change: unknown (the load balancer types' price list has no price for its type and location)",
		},
		{name: "no prices: no warning", req: request(admissionv1.Create, service("web"), nil), pricing: &lbplan.Pricing{}},
		{name: "no Pricing: no warning", req: request(admissionv1.Create, service("web"), nil)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &planner{}
			if tc.hasLB {
				p.existing = lbplan.NewActual(lbFixture())
			}
			d := &decider{deny: tc.deny}
			cfg := admission.Config{Planner: p, Gate: gate.Gate{Decider: d, Cluster: input.Cluster{Name: "k"}}, ClusterName: "k"}
			if tc.pricing != nil {
				cfg.Pricing = func() *lbplan.Pricing { return tc.pricing }
			}
			h, err := admission.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			resp := h.Review(context.Background(), tc.req)
			var costs []string
			for _, w := range resp.Warnings {
				if strings.Contains(w, "monthly cost") {
					costs = append(costs, w)
				}
			}
			switch {
			case tc.want == "" && len(costs) > 0:
				t.Errorf("cost warnings %q, want none", costs)
			case tc.want != "" && (len(costs) != 1 || !strings.Contains(costs[0], tc.want)):
				t.Errorf("cost warnings %q, want one with %q", costs, tc.want)
			}
			for _, in := range d.inputs {
				if (in.Inventory != nil) != (tc.pricing != nil) || (in.Cost != nil) != (tc.pricing != nil) {
					t.Errorf("%s: inventory %v, cost %v; want both exactly when Pricing is set", in.Operation, in.Inventory != nil, in.Cost != nil)
				}
			}
		})
	}
}

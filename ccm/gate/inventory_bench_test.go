package gate_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// benchQuota is a quota rule over the inventory and a budget rule over the cost, read on every
// create, beside the example policies.
const benchQuota = `package ccm

deny contains "load balancer quota" if {
	input.action == "loadbalancer.create"
	object.get(input.inventory.namespaces, [input.service.namespace, "load_balancers"], 0) >= 500
}

deny contains "lb31 quota" if {
	input.load_balancer.type == "lb31"
	input.inventory.cluster.by_type.lb31 >= 2
}

deny contains "namespace budget" if {
	input.action == "loadbalancer.create"
	ns := object.get(input.inventory.namespaces, input.service.namespace, {"monthly_gross": 0})
	ns.monthly_gross + input.cost.delta.monthly_gross > 10000
}
`

// BenchmarkDecide_inventory is the decision latency of an allowed create (two listeners, two
// targets: one decision) with the example policies and benchQuota, built and decided by
// gate.Gate.Decide as the CCM does: without an inventory (today's decision, plan.Pricing nil)
// and with an inventory of 200 load balancers in 20 namespaces. docs/performance.md,
// "Inventory and cost in every decision".
func BenchmarkDecide_inventory(b *testing.B) {
	files, err := policy.ReadDir("../../examples/policies")
	if err != nil {
		b.Fatal(err)
	}
	files["bench_quota.rego"] = []byte(benchQuota)
	e := policy.NewEngine(policy.Options{})
	if _, err := e.Load(context.Background(), files, policy.Source{Name: "bench"}); err != nil {
		b.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: uid, Labels: map[string]string{"app": "web"}},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			Ports:                 []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
		},
	}
	svc.Namespace = "default"                                                                                                            // public_namespaces of the examples: the decision allows
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, NodePort: 30443}) // no warning (and no log line) for port 80 alone
	d, err := lbservice.NewDesired(lbservice.DesiredInput{Service: svc, Name: "web", Defaults: config.LoadBalancer{Location: "fsn1", Type: "lb11"},
		Nodes: []lbplan.Node{{Name: "node-1", ServerID: 1}, {Name: "node-2", ServerID: 2}}})
	if err != nil {
		b.Fatal(err)
	}
	plan, err := lbplan.Compute(d, nil)
	if err != nil {
		b.Fatal(err)
	}
	prices, err := inventory.NewPrices([]inventory.Row{
		{Type: "lb11", Location: "fsn1", MonthlyNet: "5.0000", MonthlyGross: "5.9500"}, // placeholders, not Hetzner's prices
		{Type: "lb31", Location: "fsn1", MonthlyNet: "20.0000", MonthlyGross: "23.8000"},
	})
	if err != nil {
		b.Fatal(err)
	}
	var entries []inventory.Entry
	for i := range 200 {
		entries = append(entries, inventory.Entry{
			ID: int64(i + 1), Name: fmt.Sprintf("lb-%d", i), Type: "lb11", Location: "fsn1", NetworkZone: "eu-central",
			Owner:     input.Owner{Kind: inventory.OwnerService, Namespace: fmt.Sprintf("team-%d", i%20), Name: fmt.Sprintf("svc-%d", i)},
			Listeners: 2, Targets: 3,
		})
	}
	priced := plan
	priced.Pricing = &lbplan.Pricing{Inventory: inventory.Build(entries, prices), Prices: prices}
	cluster := input.Cluster{Name: "kubernetes"}
	g := gate.Gate{Decider: e, Cluster: cluster, NamespaceLabels: func(string) (map[string]string, error) { return map[string]string{}, nil }}
	for _, bc := range []struct {
		name string
		plan lbplan.Plan
	}{{"none", plan}, {"200", priced}} {
		b.Run("inventory="+bc.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				v := g.Decide(ctx, bc.plan, svc)
				if len(v.Steps) != 1 || !v.Steps[0].Decision.Allowed {
					b.Fatalf("verdict %+v, want one allowed step", v.Steps)
				}
			}
		})
	}
}

package inventory_test

import (
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

func TestPrices_Knows(t *testing.T) {
	p, err := inventory.NewPrices([]inventory.Row{{Type: "lb11", Location: "fsn1", MonthlyNet: "5", MonthlyGross: "5.95"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		lb   *input.LoadBalancer
		want bool
	}{
		{"nothing to price", nil, true},
		{"listed type and location", &input.LoadBalancer{Type: "lb11", Location: "fsn1"}, true},
		{"zone of a listed location", &input.LoadBalancer{Type: "lb11", NetworkZone: "eu-central"}, true},
		{"unlisted location", &input.LoadBalancer{Type: "lb11", Location: "hel1"}, false},
		{"unlisted type", &input.LoadBalancer{Type: "lb31", Location: "fsn1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Knows(tc.lb); got != tc.want {
				t.Errorf("Knows = %t, want %t", got, tc.want)
			}
		})
	}
}

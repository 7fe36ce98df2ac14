package lbplan_test

import (
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
)

// TestNames: the name annotation names the load balancer of a Service and of a group (its
// leader's); an empty or blank one counts as not set.
func TestNames(t *testing.T) {
	tests := []struct {
		name      string
		tweaks    []serviceTweak
		wantName  string
		wantOK    bool
		wantGroup string
	}{
		{"without the annotation", nil, "", false, "kubernetes-group-web"},
		{"with the annotation", []serviceTweak{withAnnotation(annotation.LBName, "shop-web")}, "shop-web", true, "shop-web"},
		{"an empty annotation is not set", []serviceTweak{withAnnotation(annotation.LBName, "")}, "", false, "kubernetes-group-web"},
		{"a blank annotation is not set", []serviceTweak{withAnnotation(annotation.LBName, "  ")}, "", false, "kubernetes-group-web"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService("web", tc.tweaks...)
			if n, ok := lbservice.AnnotatedName(svc); n != tc.wantName || ok != tc.wantOK {
				t.Errorf("AnnotatedName = %q, %t; want %q, %t", n, ok, tc.wantName, tc.wantOK)
			}
			if g := lbservice.GroupName(svc, "kubernetes", "web"); g != tc.wantGroup {
				t.Errorf("GroupName = %q, want %q", g, tc.wantGroup)
			}
		})
	}
}

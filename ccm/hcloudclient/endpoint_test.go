package hcloudclient_test

import (
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
)

func TestEndpoint(t *testing.T) {
	tests := []struct{ name, path, want string }{
		{"a list keeps its path", "/v1/servers", "/v1/servers"},
		{"a resource ID becomes {id}", "/v1/servers/42", "/v1/servers/{id}"},
		{"every ID in an action path becomes {id}", "/v1/networks/7/actions/add_route", "/v1/networks/{id}/actions/add_route"},
		{"names with digits stay", "/v1/load_balancer_types/lb11", "/v1/load_balancer_types/lb11"},
		{"the empty path stays empty", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := hcloudclient.Endpoint(tc.path); got != tc.want {
				t.Errorf("Endpoint(%q) = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}

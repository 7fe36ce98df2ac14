package main

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk/lbname"
)

func TestName(t *testing.T) {
	long := strings.Repeat("x", 80)
	tests := []struct {
		name string
		in   sdk.LoadBalancerNameInput
		want string
	}{
		{
			name: "Cluster, namespace and service are joined with the uid hash",
			in:   sdk.LoadBalancerNameInput{ClusterName: "prod", Service: sdk.Service{Namespace: "shop", Name: "web", UID: "u1"}},
			want: "prod-shop-web-" + hash("u1"),
		},
		{
			name: "Characters outside a-z0-9 become single dashes",
			in:   sdk.LoadBalancerNameInput{ClusterName: "Prod_EU", Service: sdk.Service{Namespace: "a..b", Name: "Web", UID: "u1"}},
			want: "prod-eu-a-b-web-" + hash("u1"),
		},
		{
			name: "An empty cluster name is left out",
			in:   sdk.LoadBalancerNameInput{Service: sdk.Service{Namespace: "shop", Name: "web", UID: "u1"}},
			want: "shop-web-" + hash("u1"),
		},
		{
			name: "A long name is cut to 63 characters keeping the hash",
			in:   sdk.LoadBalancerNameInput{Service: sdk.Service{Namespace: "ns", Name: long, UID: "u2"}},
			want: ("ns-" + long)[:54] + "-" + hash("u2"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Name(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Name = %q, want %q", got, tc.want)
			}
			if len(got) > MaxLen {
				t.Errorf("len(%q) = %d > %d", got, len(got), MaxLen)
			}
		})
	}
}

func TestServeWithoutUID(t *testing.T) {
	got := string(lbname.Serve([]byte(`{"service":{"name":"web"}}`)))
	if want := `{"error":"service has no uid"}`; got != want {
		t.Errorf("reply = %s, want %s", got, want)
	}
}

func hash(uid string) string {
	sum := sha256.Sum256([]byte(uid))
	return hex.EncodeToString(sum[:4])
}

// FuzzName checks that every name the plugin computes passes the host's validation.
func FuzzName(f *testing.F) {
	f.Add("prod", "shop", "web", "u1")
	f.Add("", "", "", "u")
	f.Add("Ünïcode", "--", "..", "x")
	f.Fuzz(func(t *testing.T, cluster, ns, name, uid string) {
		got, err := Name(sdk.LoadBalancerNameInput{ClusterName: cluster, Service: sdk.Service{Namespace: ns, Name: name, UID: uid}})
		if err != nil {
			return
		}
		if err := plugins.ValidateLoadBalancerName(got); err != nil {
			t.Errorf("Name(%q, %q, %q, %q): %v", cluster, ns, name, uid, err)
		}
	})
}

package hcloudemu

import (
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

func TestMergeHTTP(t *testing.T) {
	t.Run("http settings on a tcp service are invalid input", func(t *testing.T) {
		svc := schema.LoadBalancerService{Protocol: "tcp"}
		err := mergeHTTP(&svc, &schema.LoadBalancerActionAddServiceRequestHTTP{CookieName: ptr("c")})
		if err == nil || err.code != "invalid_input" {
			t.Fatalf("mergeHTTP() = %v, want invalid_input", err)
		}
	})
	t.Run("only the given settings change", func(t *testing.T) {
		svc := schema.LoadBalancerService{Protocol: "http", HTTP: &schema.LoadBalancerServiceHTTP{CookieName: "HCLBSTICKY", CookieLifetime: 300}}
		if err := mergeHTTP(&svc, &schema.LoadBalancerActionAddServiceRequestHTTP{CookieName: ptr("shop"), StickySessions: ptr(true)}); err != nil {
			t.Fatal(err)
		}
		if svc.HTTP.CookieName != "shop" || !svc.HTTP.StickySessions || svc.HTTP.CookieLifetime != 300 {
			t.Errorf("HTTP = %+v", *svc.HTTP)
		}
	})
}

func ptr[T any](v T) *T { return &v }

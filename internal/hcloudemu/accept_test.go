package hcloudemu_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// TestValidation_AcceptsWhatTheRealAPIAccepts sends requests the real API
// accepts (the hcloud CLI's wire shapes, the spec's boundary values, other
// notations of an address) and asserts the emulator answers 201 and applies
// them as stated.
func TestValidation_AcceptsWhatTheRealAPIAccepts(t *testing.T) {
	w := newWorld(t)
	c := w.client
	lb := createLB(t, w, "main")
	waitAll(t, c)(c.LoadBalancer.AddService(ctx(t), lb, hcloud.LoadBalancerAddServiceOpts{Protocol: "tcp", ListenPort: hcloud.Ptr(80)}))
	waitAll(t, c)(c.LoadBalancer.AddIPTarget(ctx(t), lb, hcloud.LoadBalancerAddIPTargetOpts{IP: mustIP(t, "2001:db8:1::5")}))
	v6 := w.emu.LoadBalancers()[0].PublicNet.IPv6.IP
	action := w.endpoint + fmt.Sprintf("/load_balancers/%d/actions/", lb.ID)

	service := func(port int) func(*testing.T, schema.LoadBalancer) *schema.LoadBalancerService {
		return func(t *testing.T, got schema.LoadBalancer) *schema.LoadBalancerService {
			t.Helper()
			i := slices.IndexFunc(got.Services, func(s schema.LoadBalancerService) bool { return s.ListenPort == port })
			if i < 0 {
				t.Fatalf("no service on port %d: %+v", port, got.Services)
			}
			return &got.Services[i]
		}
	}
	tcpUnchanged := func(t *testing.T, got schema.LoadBalancer) {
		s := service(80)(t, got)
		if s.Protocol != "tcp" || s.HTTP != nil || s.HealthCheck.Protocol != "tcp" || s.HealthCheck.HTTP != nil {
			t.Errorf("service 80 = %+v, health check %+v; want tcp without http settings", s, s.HealthCheck)
		}
	}
	for _, tc := range []struct {
		name  string
		verb  string
		body  string
		check func(*testing.T, schema.LoadBalancer)
	}{
		{"update_service with an empty http object on a tcp service (hcloud CLI)", "update_service",
			`{"listen_port":80,"http":{}}`, tcpUnchanged},
		{"update_service with an empty health_check.http object on a tcp check (hcloud CLI)", "update_service",
			`{"listen_port":80,"health_check":{"protocol":"tcp","http":{}}}`, tcpUnchanged},
		{"update_service with an empty certificate list on a tcp service", "update_service",
			`{"listen_port":80,"http":{"certificates":[]}}`, tcpUnchanged},
		{"add_service with every field, empty http objects, tcp", "add_service",
			`{"protocol":"tcp","listen_port":81,"destination_port":8081,"proxyprotocol":false,"http":{},` +
				`"health_check":{"protocol":"tcp","port":8081,"interval":15,"timeout":10,"retries":3,"http":{}}}`,
			func(t *testing.T, got schema.LoadBalancer) {
				if s := service(81)(t, got); s.DestinationPort != 8081 || s.HTTP != nil || s.HealthCheck.HTTP != nil {
					t.Errorf("service 81 = %+v", s)
				}
			}},
		{"add_service with the spec's upper bounds", "add_service",
			`{"protocol":"tcp","listen_port":82,"destination_port":82,"proxyprotocol":false,` +
				`"health_check":{"protocol":"tcp","port":82,"interval":60,"timeout":60,"retries":5}}`,
			func(t *testing.T, got schema.LoadBalancer) {
				if hc := service(82)(t, got).HealthCheck; hc.Interval != 60 || hc.Timeout != 60 || hc.Retries != 5 {
					t.Errorf("health check = %+v", hc)
				}
			}},
		{"add_service http with the spec's lower bounds, 20 status codes and redirect_http false", "add_service",
			`{"protocol":"http","listen_port":83,"destination_port":83,"proxyprotocol":false,` +
				`"http":{"cookie_name":"c","cookie_lifetime":30,"redirect_http":false,"sticky_sessions":true},` +
				`"health_check":{"protocol":"http","port":83,"interval":3,"timeout":1,"retries":1,` +
				`"http":{"domain":"` + strings.Repeat("d", 128) + `","path":"/a%20b","status_codes":["` + strings.Repeat(`2??","`, 19) + `2??"]}}}`,
			func(t *testing.T, got schema.LoadBalancer) {
				s := service(83)(t, got)
				if s.HTTP.CookieLifetime != 30 || !s.HTTP.StickySessions || len(s.HealthCheck.HTTP.StatusCodes) != 20 || s.HealthCheck.Retries != 1 {
					t.Errorf("service 83 = %+v, http %+v, health check %+v", s, s.HTTP, s.HealthCheck)
				}
			}},
		{"update_service with cookie_lifetime 86400", "update_service",
			`{"listen_port":83,"http":{"cookie_lifetime":86400}}`,
			func(t *testing.T, got schema.LoadBalancer) {
				if s := service(83)(t, got); s.HTTP.CookieLifetime != 86400 {
					t.Errorf("cookie_lifetime = %d", s.HTTP.CookieLifetime)
				}
			}},
		{"update_service with timeout_idle 30, then 300 (official CCM doc: 30-300)", "update_service",
			`{"listen_port":83,"http":{"timeout_idle":30}}`,
			func(t *testing.T, got schema.LoadBalancer) {
				if s := service(83)(t, got); s.HTTP.TimeoutIdle != 30 {
					t.Errorf("timeout_idle = %d", s.HTTP.TimeoutIdle)
				}
			}},
		{"update_service with timeout_idle 300", "update_service",
			`{"listen_port":83,"http":{"timeout_idle":300}}`,
			func(t *testing.T, got schema.LoadBalancer) {
				if s := service(83)(t, got); s.HTTP.TimeoutIdle != 300 {
					t.Errorf("timeout_idle = %d", s.HTTP.TimeoutIdle)
				}
			}},
		{"add_service https without certificates (spec: empty for TLS/SSL passthrough)", "add_service",
			`{"protocol":"https","listen_port":443,"destination_port":8443,"proxyprotocol":false}`,
			func(t *testing.T, got schema.LoadBalancer) {
				if s := service(443)(t, got); s.Protocol != "https" || s.HTTP == nil || len(s.HTTP.Certificates) != 0 {
					t.Errorf("service 443 = %+v, http %+v", s, s.HTTP)
				}
			}},
		{"change_dns_ptr naming the IPv6 address in its expanded form", "change_dns_ptr",
			`{"ip":"` + netip.MustParseAddr(v6).StringExpanded() + `","dns_ptr":"lb.example.com"}`,
			func(t *testing.T, got schema.LoadBalancer) {
				if got.PublicNet.IPv6.DNSPtr != "lb.example.com" {
					t.Errorf("IPv6 dns_ptr = %q", got.PublicNet.IPv6.DNSPtr)
				}
			}},
		{"remove_target naming an IPv6 target in its expanded form", "remove_target",
			`{"type":"ip","ip":{"ip":"2001:0db8:0001:0000:0000:0000:0000:0005"}}`,
			func(t *testing.T, got schema.LoadBalancer) {
				if len(got.Targets) != 0 {
					t.Errorf("targets = %+v, want none", got.Targets)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, _ := rawRequest(t, w.emu, "POST", action+tc.verb, tc.body)
			if status != 201 {
				t.Fatalf("status = %d, body %s; want 201", status, body)
			}
			got, ok := w.emu.LoadBalancer(lb.ID)
			if !ok {
				t.Fatal("load balancer gone")
			}
			tc.check(t, got)
		})
	}

	t.Run("hcloud-go UpdateService with empty HTTP option structs on a tcp service", func(t *testing.T) {
		waitAll(t, c)(c.LoadBalancer.UpdateService(ctx(t), lb, 80, hcloud.LoadBalancerUpdateServiceOpts{
			HTTP:        &hcloud.LoadBalancerUpdateServiceOptsHTTP{},
			HealthCheck: &hcloud.LoadBalancerUpdateServiceOptsHealthCheck{Interval: hcloud.Ptr(20 * time.Second), HTTP: &hcloud.LoadBalancerUpdateServiceOptsHealthCheckHTTP{}},
		}))
		got, _ := w.emu.LoadBalancer(lb.ID)
		tcpUnchanged(t, got)
		if hc := service(80)(t, got).HealthCheck; hc.Interval != 20 {
			t.Errorf("interval = %d, want 20", hc.Interval)
		}
	})
}

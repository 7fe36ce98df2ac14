package hcloudemu_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

func TestValidation_ErrorsUseTheRealCodesAndChangeNothing(t *testing.T) {
	tiny := hcloudemu.WithSeed(hcloudemu.Seed{LoadBalancerTypes: []schema.LoadBalancerType{
		{ID: 99, Name: "lb-tiny", MaxServices: 1, MaxTargets: 2, MaxConnections: 100, MaxAssignedCertificates: 1},
	}})
	w := newWorld(t, tiny)
	c := w.client
	lb := createLB(t, w, "main", func(o *hcloud.LoadBalancerCreateOpts) { o.LoadBalancerType = &hcloud.LoadBalancerType{Name: "lb-tiny"} })
	public := createLB(t, w, "public-only", func(o *hcloud.LoadBalancerCreateOpts) { o.Network = nil })
	waitAll(t, c)(c.LoadBalancer.AddService(ctx(t), lb, hcloud.LoadBalancerAddServiceOpts{Protocol: "tcp", ListenPort: hcloud.Ptr(80)}))
	waitAll(t, c)(c.LoadBalancer.AddServerTarget(ctx(t), lb, hcloud.LoadBalancerAddServerTargetOpts{Server: &hcloud.Server{ID: w.servers[0]}, UsePrivateIP: hcloud.Ptr(true)}))
	waitAll(t, c)(c.LoadBalancer.AddServerTarget(ctx(t), lb, hcloud.LoadBalancerAddServerTargetOpts{Server: &hcloud.Server{ID: w.servers[1]}}))
	waitAll(t, c)(c.LoadBalancer.ChangeProtection(ctx(t), lb, hcloud.LoadBalancerChangeProtectionOpts{Delete: hcloud.Ptr(true)}))

	createOpts := func(name string) hcloud.LoadBalancerCreateOpts {
		return hcloud.LoadBalancerCreateOpts{Name: name, LoadBalancerType: &hcloud.LoadBalancerType{Name: "lb11"}, Location: &hcloud.Location{Name: "fsn1"}}
	}
	for _, tc := range []struct {
		name  string
		call  func(context.Context) error
		code  hcloud.ErrorCode
		field string
	}{
		{"A taken load balancer name is a uniqueness_error", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.Create(ctx, createOpts("main"))
			return err
		}, "uniqueness_error", ""},
		{"An unknown load balancer type is invalid_input on load_balancer_type", func(ctx context.Context) error {
			o := createOpts("new")
			o.LoadBalancerType = &hcloud.LoadBalancerType{Name: "lb99"}
			_, _, err := c.LoadBalancer.Create(ctx, o)
			return err
		}, "invalid_input", "load_balancer_type"},
		{"A name with trailing whitespace is invalid_input on name", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.Create(ctx, createOpts("new "))
			return err
		}, "invalid_input", "name"},
		{"A create without location or network zone is invalid_input", func(ctx context.Context) error {
			o := createOpts("new")
			o.Location = nil
			_, _, err := c.LoadBalancer.Create(ctx, o)
			return err
		}, "invalid_input", "location"},
		{"An invalid label is invalid_input on labels", func(ctx context.Context) error {
			o := createOpts("new")
			o.Labels = map[string]string{"bad key": "x"}
			_, _, err := c.LoadBalancer.Create(ctx, o)
			return err
		}, "invalid_input", "labels"},
		{"A create in a zone without subnet is no_subnet_available", func(ctx context.Context) error {
			o := createOpts("new")
			o.Location = &hcloud.Location{Name: "ash"}
			o.Network = &hcloud.Network{ID: w.network}
			_, _, err := c.LoadBalancer.Create(ctx, o)
			return err
		}, "no_subnet_available", ""},
		{"A create with more inline targets than max_targets is resource_limit_exceeded", func(ctx context.Context) error {
			o := createOpts("new")
			o.LoadBalancerType = &hcloud.LoadBalancerType{Name: "lb-tiny"}
			for _, id := range w.servers {
				o.Targets = append(o.Targets, hcloud.LoadBalancerCreateOptsTarget{Type: "server", Server: hcloud.LoadBalancerCreateOptsTargetServer{Server: &hcloud.Server{ID: id}}})
			}
			_, _, err := c.LoadBalancer.Create(ctx, o)
			return err
		}, "resource_limit_exceeded", ""},
		{"A create with an inline private-IP target and no network is load_balancer_not_attached_to_network", func(ctx context.Context) error {
			o := createOpts("new")
			o.Targets = []hcloud.LoadBalancerCreateOptsTarget{{Type: "server", Server: hcloud.LoadBalancerCreateOptsTargetServer{Server: &hcloud.Server{ID: w.servers[0]}}, UsePrivateIP: hcloud.Ptr(true)}}
			_, _, err := c.LoadBalancer.Create(ctx, o)
			return err
		}, "load_balancer_not_attached_to_network", ""},
		{"A create with two inline services on one port is source_port_already_used", func(ctx context.Context) error {
			o := createOpts("new")
			svc := hcloud.LoadBalancerCreateOptsService{Protocol: "tcp", ListenPort: hcloud.Ptr(80)}
			o.Services = []hcloud.LoadBalancerCreateOptsService{svc, svc}
			_, _, err := c.LoadBalancer.Create(ctx, o)
			return err
		}, "source_port_already_used", ""},
		{"A renaming PUT to a taken name is a uniqueness_error", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.Update(ctx, public, hcloud.LoadBalancerUpdateOpts{Name: "main"})
			return err
		}, "uniqueness_error", ""},
		{"A second target for the same server is target_already_defined", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.AddServerTarget(ctx, lb, hcloud.LoadBalancerAddServerTargetOpts{Server: &hcloud.Server{ID: w.servers[0]}})
			return err
		}, "target_already_defined", ""},
		{"A target past max_targets is resource_limit_exceeded", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.AddServerTarget(ctx, lb, hcloud.LoadBalancerAddServerTargetOpts{Server: &hcloud.Server{ID: w.servers[2]}})
			return err
		}, "resource_limit_exceeded", ""},
		{"A service past max_services is resource_limit_exceeded", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.AddService(ctx, lb, hcloud.LoadBalancerAddServiceOpts{Protocol: "tcp", ListenPort: hcloud.Ptr(443)})
			return err
		}, "resource_limit_exceeded", ""},
		{"A service on a used port is source_port_already_used", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.AddService(ctx, lb, hcloud.LoadBalancerAddServiceOpts{Protocol: "tcp", ListenPort: hcloud.Ptr(80)})
			return err
		}, "source_port_already_used", ""},
		{"Updating a missing service is not_found", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.UpdateService(ctx, lb, 8080, hcloud.LoadBalancerUpdateServiceOpts{DestinationPort: hcloud.Ptr(1)})
			return err
		}, "not_found", ""},
		{"A service without listen port is invalid_input", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.AddService(ctx, public, hcloud.LoadBalancerAddServiceOpts{Protocol: "tcp"})
			return err
		}, "invalid_input", "listen_port"},
		{"A private-IP target on a detached load balancer is load_balancer_not_attached_to_network", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.AddServerTarget(ctx, public, hcloud.LoadBalancerAddServerTargetOpts{Server: &hcloud.Server{ID: w.servers[0]}, UsePrivateIP: hcloud.Ptr(true)})
			return err
		}, "load_balancer_not_attached_to_network", ""},
		{"A target for a missing server is invalid_input", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.AddServerTarget(ctx, public, hcloud.LoadBalancerAddServerTargetOpts{Server: &hcloud.Server{ID: 4242}})
			return err
		}, "invalid_input", "server.id"},
		{"Removing a target that is not there is not_found", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.RemoveIPTarget(ctx, lb, net.ParseIP("192.0.2.1"))
			return err
		}, "not_found", ""},
		{"Attaching to a network twice is load_balancer_already_attached", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.AttachToNetwork(ctx, lb, hcloud.LoadBalancerAttachToNetworkOpts{Network: &hcloud.Network{ID: w.network}})
			return err
		}, "load_balancer_already_attached", ""},
		{"Attaching with a taken IP is ip_not_available", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.AttachToNetwork(ctx, public, hcloud.LoadBalancerAttachToNetworkOpts{Network: &hcloud.Network{ID: w.network}, IP: net.ParseIP("10.0.0.2")})
			return err
		}, "ip_not_available", ""},
		{"Attaching with the gateway IP is ip_not_available", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.AttachToNetwork(ctx, public, hcloud.LoadBalancerAttachToNetworkOpts{Network: &hcloud.Network{ID: w.network}, IP: net.ParseIP("10.0.0.1")})
			return err
		}, "ip_not_available", ""},
		{"Attaching to a missing network is not_found", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.AttachToNetwork(ctx, public, hcloud.LoadBalancerAttachToNetworkOpts{Network: &hcloud.Network{ID: 4242}})
			return err
		}, "not_found", ""},
		{"Detaching from a network it is not in is load_balancer_not_attached_to_network", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.DetachFromNetwork(ctx, public, hcloud.LoadBalancerDetachFromNetworkOpts{Network: &hcloud.Network{ID: w.network}})
			return err
		}, "load_balancer_not_attached_to_network", ""},
		{"Disabling the public interface with public targets is targets_without_use_private_ip", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.DisablePublicInterface(ctx, lb)
			return err
		}, "targets_without_use_private_ip", ""},
		{"Disabling the public interface without a network is load_balancer_not_attached_to_network", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.DisablePublicInterface(ctx, public)
			return err
		}, "load_balancer_not_attached_to_network", ""},
		{"Changing to an unknown type is invalid_load_balancer_type", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.ChangeType(ctx, lb, hcloud.LoadBalancerChangeTypeOpts{LoadBalancerType: &hcloud.LoadBalancerType{Name: "lb99"}})
			return err
		}, "invalid_load_balancer_type", ""},
		{"An unknown algorithm is invalid_input", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.ChangeAlgorithm(ctx, lb, hcloud.LoadBalancerChangeAlgorithmOpts{Type: "random"})
			return err
		}, "invalid_input", "type"},
		{"A DNS pointer for a foreign IP is invalid_input", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.ChangeDNSPtr(ctx, lb, "192.0.2.200", hcloud.Ptr("x.example.com"))
			return err
		}, "invalid_input", "ip"},
		{"Deleting a protected load balancer is protected", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.DeleteWithResult(ctx, lb)
			return err
		}, "protected", ""},
		{"A public route destination is invalid_input", func(ctx context.Context) error {
			_, _, err := c.Network.AddRoute(ctx, &hcloud.Network{ID: w.network}, hcloud.NetworkAddRouteOpts{Route: hcloud.NetworkRoute{Destination: mustCIDR(t, "8.8.8.0/24"), Gateway: mustIP(t, "10.0.0.2")}})
			return err
		}, "invalid_input", "destination"},
		{"A route overlapping a subnet is invalid_input", func(ctx context.Context) error {
			_, _, err := c.Network.AddRoute(ctx, &hcloud.Network{ID: w.network}, hcloud.NetworkAddRouteOpts{Route: hcloud.NetworkRoute{Destination: mustCIDR(t, "10.0.1.0/24"), Gateway: mustIP(t, "10.0.0.2")}})
			return err
		}, "invalid_input", "destination"},
		{"A route via the network's first IP is invalid_input", func(ctx context.Context) error {
			_, _, err := c.Network.AddRoute(ctx, &hcloud.Network{ID: w.network}, hcloud.NetworkAddRouteOpts{Route: hcloud.NetworkRoute{Destination: mustCIDR(t, "10.244.0.0/24"), Gateway: mustIP(t, "10.0.0.1")}})
			return err
		}, "invalid_input", "gateway"},
		{"Deleting a missing route is not_found", func(ctx context.Context) error {
			_, _, err := c.Network.DeleteRoute(ctx, &hcloud.Network{ID: w.network}, hcloud.NetworkDeleteRouteOpts{Route: hcloud.NetworkRoute{Destination: mustCIDR(t, "10.244.9.0/24"), Gateway: mustIP(t, "10.0.0.2")}})
			return err
		}, "not_found", ""},
		{"An https service naming a missing certificate is invalid_input", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.AddService(ctx, public, hcloud.LoadBalancerAddServiceOpts{Protocol: "https",
				HTTP: &hcloud.LoadBalancerAddServiceOptsHTTP{Certificates: []*hcloud.Certificate{{ID: 4242}}}})
			return err
		}, "invalid_input", "http.certificates"},
		// Ranges and rules the spec states for services (add_service and
		// update_service share them).
		{"Health check retries 0 is invalid_input (spec: 1-5)", func(ctx context.Context) error {
			return addTCPService(ctx, c, public, func(o *hcloud.LoadBalancerAddServiceOpts) { o.HealthCheck.Retries = hcloud.Ptr(0) })
		}, "invalid_input", "health_check.retries"},
		{"Health check interval 2 s is invalid_input (spec: 3-60)", func(ctx context.Context) error {
			return addTCPService(ctx, c, public, func(o *hcloud.LoadBalancerAddServiceOpts) { o.HealthCheck.Interval = hcloud.Ptr(2 * time.Second) })
		}, "invalid_input", "health_check.interval"},
		{"Health check interval 61 s is invalid_input (spec: 3-60)", func(ctx context.Context) error {
			return addTCPService(ctx, c, public, func(o *hcloud.LoadBalancerAddServiceOpts) { o.HealthCheck.Interval = hcloud.Ptr(61 * time.Second) })
		}, "invalid_input", "health_check.interval"},
		{"Health check timeout 61 s on update is invalid_input (spec: 1-60)", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.UpdateService(ctx, lb, 80, hcloud.LoadBalancerUpdateServiceOpts{
				HealthCheck: &hcloud.LoadBalancerUpdateServiceOptsHealthCheck{Timeout: hcloud.Ptr(61 * time.Second)}})
			return err
		}, "invalid_input", "health_check.timeout"},
		{"A health check domain with a space is invalid_input", func(ctx context.Context) error {
			return addHTTPService(ctx, c, public, func(o *hcloud.LoadBalancerAddServiceOpts) { o.HealthCheck.HTTP.Domain = hcloud.Ptr("a b.example.com") })
		}, "invalid_input", "health_check.http.domain"},
		{"A health check domain with a percent sign is invalid_input", func(ctx context.Context) error {
			return addHTTPService(ctx, c, public, func(o *hcloud.LoadBalancerAddServiceOpts) { o.HealthCheck.HTTP.Domain = hcloud.Ptr("a%20b") })
		}, "invalid_input", "health_check.http.domain"},
		{"A health check domain of 129 characters is invalid_input", func(ctx context.Context) error {
			return addHTTPService(ctx, c, public, func(o *hcloud.LoadBalancerAddServiceOpts) {
				o.HealthCheck.HTTP.Domain = hcloud.Ptr(strings.Repeat("a", 129))
			})
		}, "invalid_input", "health_check.http.domain"},
		{"A health check path with a literal space is invalid_input", func(ctx context.Context) error {
			return addHTTPService(ctx, c, public, func(o *hcloud.LoadBalancerAddServiceOpts) { o.HealthCheck.HTTP.Path = hcloud.Ptr("/a b") })
		}, "invalid_input", "health_check.http.path"},
		{"A health check path of 257 characters is invalid_input", func(ctx context.Context) error {
			return addHTTPService(ctx, c, public, func(o *hcloud.LoadBalancerAddServiceOpts) {
				o.HealthCheck.HTTP.Path = hcloud.Ptr("/" + strings.Repeat("a", 256))
			})
		}, "invalid_input", "health_check.http.path"},
		{"A health check response of 257 characters is invalid_input", func(ctx context.Context) error {
			return addHTTPService(ctx, c, public, func(o *hcloud.LoadBalancerAddServiceOpts) {
				o.HealthCheck.HTTP.Response = hcloud.Ptr(strings.Repeat("a", 257))
			})
		}, "invalid_input", "health_check.http.response"},
		{"21 health check status codes are invalid_input", func(ctx context.Context) error {
			return addHTTPService(ctx, c, public, func(o *hcloud.LoadBalancerAddServiceOpts) {
				o.HealthCheck.HTTP.StatusCodes = strings.Split(strings.Repeat("200,", 20)+"200", ",")
			})
		}, "invalid_input", "health_check.http.status_codes"},
		{"A cookie lifetime of 29 s is invalid_input (spec: 30-86400)", func(ctx context.Context) error {
			return addHTTPService(ctx, c, public, func(o *hcloud.LoadBalancerAddServiceOpts) { o.HTTP.CookieLifetime = hcloud.Ptr(29 * time.Second) })
		}, "invalid_input", "http.cookie_lifetime"},
		{"A cookie lifetime of 86401 s is invalid_input (spec: 30-86400)", func(ctx context.Context) error {
			return addHTTPService(ctx, c, public, func(o *hcloud.LoadBalancerAddServiceOpts) { o.HTTP.CookieLifetime = hcloud.Ptr(86401 * time.Second) })
		}, "invalid_input", "http.cookie_lifetime"},
		{"An idle timeout of 29 s is invalid_input (official CCM doc: 30-300)", func(ctx context.Context) error {
			return addHTTPService(ctx, c, public, func(o *hcloud.LoadBalancerAddServiceOpts) { o.HTTP.TimeoutIdle = hcloud.Ptr(29 * time.Second) })
		}, "invalid_input", "http.timeout_idle"},
		{"An idle timeout of 301 s is invalid_input (official CCM doc: 30-300)", func(ctx context.Context) error {
			return addHTTPService(ctx, c, public, func(o *hcloud.LoadBalancerAddServiceOpts) { o.HTTP.TimeoutIdle = hcloud.Ptr(301 * time.Second) })
		}, "invalid_input", "http.timeout_idle"},
		{"A cookie name of 101 characters is invalid_input (spec: 1-100)", func(ctx context.Context) error {
			return addHTTPService(ctx, c, public, func(o *hcloud.LoadBalancerAddServiceOpts) { o.HTTP.CookieName = hcloud.Ptr(strings.Repeat("c", 101)) })
		}, "invalid_input", "http.cookie_name"},
		{"An empty cookie name is invalid_input (spec: 1-100)", func(ctx context.Context) error {
			return addHTTPService(ctx, c, public, func(o *hcloud.LoadBalancerAddServiceOpts) { o.HTTP.CookieName = hcloud.Ptr("") })
		}, "invalid_input", "http.cookie_name"},
		{"redirect_http on an http service is invalid_input (spec: https only)", func(ctx context.Context) error {
			return addHTTPService(ctx, c, public, func(o *hcloud.LoadBalancerAddServiceOpts) { o.HTTP.RedirectHTTP = hcloud.Ptr(true) })
		}, "invalid_input", "http.redirect_http"},
		{"Sticky sessions on a tcp service are invalid_input (spec: http and https only)", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.UpdateService(ctx, lb, 80, hcloud.LoadBalancerUpdateServiceOpts{
				HTTP: &hcloud.LoadBalancerUpdateServiceOptsHTTP{StickySessions: hcloud.Ptr(true)}})
			return err
		}, "invalid_input", "http"},
		{"A health check path on a tcp check is invalid_input", func(ctx context.Context) error {
			_, _, err := c.LoadBalancer.UpdateService(ctx, lb, 80, hcloud.LoadBalancerUpdateServiceOpts{
				HealthCheck: &hcloud.LoadBalancerUpdateServiceOptsHealthCheck{HTTP: &hcloud.LoadBalancerUpdateServiceOptsHealthCheckHTTP{Path: hcloud.Ptr("/x")}}})
			return err
		}, "invalid_input", "health_check.http"},
		{"An uploaded certificate that is not PEM is invalid_input", func(ctx context.Context) error {
			_, _, err := c.Certificate.Create(ctx, hcloud.CertificateCreateOpts{Name: "u", Certificate: "nope", PrivateKey: "nope"})
			return err
		}, "invalid_input", "certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := w.emu.LoadBalancers()
			beforeNet, _ := w.emu.Network(w.network)
			err := tc.call(ctx(t))
			if !hcloud.IsError(err, tc.code) {
				t.Fatalf("err = %v, want %s", err, tc.code)
			}
			if tc.field != "" {
				var herr hcloud.Error
				errors.As(err, &herr)
				details, ok := herr.Details.(hcloud.ErrorDetailsInvalidInput)
				if !ok || len(details.Fields) == 0 || details.Fields[0].Name != tc.field {
					t.Errorf("details = %#v, want field %q", herr.Details, tc.field)
				}
			}
			if diff := cmp.Diff(before, w.emu.LoadBalancers()); diff != "" {
				t.Errorf("rejected request changed load balancers (-before +after):\n%s", diff)
			}
			afterNet, _ := w.emu.Network(w.network)
			if diff := cmp.Diff(beforeNet, afterNet); diff != "" {
				t.Errorf("rejected request changed the network (-before +after):\n%s", diff)
			}
		})
	}
}

// waitAll returns a function taking an action-returning call's results and
// waiting for the action.
func waitAll(t *testing.T, c *hcloud.Client) func(*hcloud.Action, *hcloud.Response, error) {
	return func(a *hcloud.Action, r *hcloud.Response, err error) {
		t.Helper()
		mustWait(t, c, a, r, err)
	}
}

// addTCPService adds a tcp service on port 9000 with a complete health
// check, changed by edit.
func addTCPService(ctx context.Context, c *hcloud.Client, lb *hcloud.LoadBalancer, edit func(*hcloud.LoadBalancerAddServiceOpts)) error {
	o := hcloud.LoadBalancerAddServiceOpts{Protocol: "tcp", ListenPort: hcloud.Ptr(9000), DestinationPort: hcloud.Ptr(9000),
		HealthCheck: &hcloud.LoadBalancerAddServiceOptsHealthCheck{Protocol: "tcp", Port: hcloud.Ptr(9000),
			Interval: hcloud.Ptr(15 * time.Second), Timeout: hcloud.Ptr(10 * time.Second), Retries: hcloud.Ptr(3)}}
	edit(&o)
	_, _, err := c.LoadBalancer.AddService(ctx, lb, o)
	return err
}

// addHTTPService adds an http service on port 8080 with HTTP settings and an
// http health check, changed by edit.
func addHTTPService(ctx context.Context, c *hcloud.Client, lb *hcloud.LoadBalancer, edit func(*hcloud.LoadBalancerAddServiceOpts)) error {
	o := hcloud.LoadBalancerAddServiceOpts{Protocol: "http", ListenPort: hcloud.Ptr(8080), DestinationPort: hcloud.Ptr(8080),
		HTTP: &hcloud.LoadBalancerAddServiceOptsHTTP{CookieName: hcloud.Ptr("HCLBSTICKY")},
		HealthCheck: &hcloud.LoadBalancerAddServiceOptsHealthCheck{Protocol: "http", Port: hcloud.Ptr(8080),
			HTTP: &hcloud.LoadBalancerAddServiceOptsHealthCheckHTTP{Path: hcloud.Ptr("/healthz")}}}
	edit(&o)
	_, _, err := c.LoadBalancer.AddService(ctx, lb, o)
	return err
}

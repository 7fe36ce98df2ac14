package executor

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/exp/ctxutil"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/apireq"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/routeplan"
)

// wire is one request as it left the client: what the API and hcloud-go's metrics see.
type wire struct {
	method, path, opPath, body string
}

// capture records every request and answers {} (hcloud-go decodes it as an empty answer).
type capture struct{ got []wire }

func (c *capture) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
	}
	c.got = append(c.got, wire{method: r.Method, path: r.URL.Path, opPath: ctxutil.OpPath(r.Context()), body: string(body)})
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": []string{"application/json"}},
		Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
}

// sendBoth sends api through the executor's newRequest and the call of hcloud-go's typed
// method, and returns both as they left the client.
func sendBoth(t *testing.T, build func(*Executor) (*http.Request, error), typed func(context.Context, *hcloud.Client) error) (ours, theirs wire) {
	t.Helper()
	c := &capture{}
	client := hcloud.NewClient(hcloud.WithEndpoint("http://api.test/v1"), hcloud.WithToken("t"),
		hcloud.WithHTTPClient(&http.Client{Transport: c}))
	x := &Executor{client: client}
	req, err := build(x)
	if err != nil {
		t.Fatalf("build our request: %v", err)
	}
	if _, err := client.Do(req, nil); err != nil {
		t.Fatalf("send our request: %v", err)
	}
	if err := typed(context.Background(), client); err != nil {
		t.Fatalf("hcloud-go's typed method: %v", err)
	}
	if len(c.got) != 2 {
		t.Fatalf("captured %d requests, want 2", len(c.got))
	}
	return c.got[0], c.got[1]
}

// TestRequests_AreWhatHcloudGoSends is the request golden of every kind of mutation: the
// method, path, body bytes and metric label of each kind's request equal those hcloud-go's
// typed method (the one the executor called before requests were data, and the official CCM
// calls) sends for the same change. The table must hold every kind (lbplan.Kinds,
// routeplan.Kinds). Each request also passes the executor's vetting (its endpoint in
// apireq.Endpoints has its kind's action and operation), and every endpoint of the table is
// some kind's.
func TestRequests_AreWhatHcloudGoSends(t *testing.T) {
	d := func(s string) *time.Duration { v, _ := time.ParseDuration(s); return &v }
	httpsListener := lbplan.Listener{
		Protocol: hcloud.LoadBalancerServiceProtocolHTTPS, ListenPort: 443, DestinationPort: 30443, Proxyprotocol: new(true),
		HTTP: lbplan.HTTP{CookieName: new("SID"), CookieLifetime: d("1h"), TimeoutIdle: d("30s"),
			Certificates: []int64{lbplan.PendingCertificateID, 7}, RedirectHTTP: new(true), StickySessions: new(false)},
		HealthCheck: lbplan.HealthCheck{Protocol: hcloud.LoadBalancerServiceProtocolHTTP, Port: 30080, Interval: d("15s"),
			Timeout: d("10s"), Retries: new(3), Domain: new("example.com"), Path: new("/healthz"), StatusCodes: []string{"2??"}, TLS: new(false)},
	}
	tcpListener := lbplan.Listener{Protocol: hcloud.LoadBalancerServiceProtocolTCP, ListenPort: 80, DestinationPort: 30080,
		HealthCheck: lbplan.HealthCheck{Protocol: hcloud.LoadBalancerServiceProtocolTCP, Port: 30080}}
	const certID = 99
	// The same listeners as hcloud-go's options, written out (certificate 99 in place of the
	// pending one).
	httpsAdd := hcloud.LoadBalancerAddServiceOpts{Protocol: "https", ListenPort: new(443), DestinationPort: new(30443), Proxyprotocol: new(true),
		HTTP: &hcloud.LoadBalancerAddServiceOptsHTTP{CookieName: new("SID"), CookieLifetime: d("1h"), TimeoutIdle: d("30s"),
			Certificates: []*hcloud.Certificate{{ID: certID}, {ID: 7}}, RedirectHTTP: new(true), StickySessions: new(false)},
		HealthCheck: &hcloud.LoadBalancerAddServiceOptsHealthCheck{Protocol: "http", Port: new(30080), Interval: d("15s"), Timeout: d("10s"), Retries: new(3),
			HTTP: &hcloud.LoadBalancerAddServiceOptsHealthCheckHTTP{Domain: new("example.com"), Path: new("/healthz"), StatusCodes: []string{"2??"}, TLS: new(false)}},
	}
	tcpAdd := hcloud.LoadBalancerAddServiceOpts{Protocol: "tcp", ListenPort: new(80), DestinationPort: new(30080),
		HealthCheck: &hcloud.LoadBalancerAddServiceOptsHealthCheck{Protocol: "tcp", Port: new(30080)}}
	createService := func(a hcloud.LoadBalancerAddServiceOpts) hcloud.LoadBalancerCreateOptsService {
		o := hcloud.LoadBalancerCreateOptsService{Protocol: a.Protocol, ListenPort: a.ListenPort, DestinationPort: a.DestinationPort, Proxyprotocol: a.Proxyprotocol,
			HealthCheck: &hcloud.LoadBalancerCreateOptsServiceHealthCheck{Protocol: a.HealthCheck.Protocol, Port: a.HealthCheck.Port,
				Interval: a.HealthCheck.Interval, Timeout: a.HealthCheck.Timeout, Retries: a.HealthCheck.Retries}}
		if a.HTTP != nil {
			o.HTTP = &hcloud.LoadBalancerCreateOptsServiceHTTP{CookieName: a.HTTP.CookieName, CookieLifetime: a.HTTP.CookieLifetime,
				Certificates: a.HTTP.Certificates, RedirectHTTP: a.HTTP.RedirectHTTP, StickySessions: a.HTTP.StickySessions, TimeoutIdle: a.HTTP.TimeoutIdle}
		}
		if h := a.HealthCheck.HTTP; h != nil {
			o.HealthCheck.HTTP = &hcloud.LoadBalancerCreateOptsServiceHealthCheckHTTP{Domain: h.Domain, Path: h.Path, StatusCodes: h.StatusCodes, TLS: h.TLS}
		}
		return o
	}
	httpsUpdate := hcloud.LoadBalancerUpdateServiceOpts{Protocol: "https", DestinationPort: new(30443), Proxyprotocol: new(true),
		HTTP: &hcloud.LoadBalancerUpdateServiceOptsHTTP{CookieName: new("SID"), CookieLifetime: d("1h"), TimeoutIdle: d("30s"),
			Certificates: []*hcloud.Certificate{{ID: certID}, {ID: 7}}, RedirectHTTP: new(true), StickySessions: new(false)},
		HealthCheck: &hcloud.LoadBalancerUpdateServiceOptsHealthCheck{Protocol: "http", Port: new(30080), Interval: d("15s"), Timeout: d("10s"), Retries: new(3),
			HTTP: &hcloud.LoadBalancerUpdateServiceOptsHealthCheckHTTP{Domain: new("example.com"), Path: new("/healthz"), StatusCodes: []string{"2??"}, TLS: new(false)}},
	}
	tcpUpdate := hcloud.LoadBalancerUpdateServiceOpts{Protocol: "tcp", DestinationPort: new(30080),
		HealthCheck: &hcloud.LoadBalancerUpdateServiceOptsHealthCheck{Protocol: "tcp", Port: new(30080)}}
	lb := &lbplan.Actual{ID: 42, Name: "web", IPv4: "203.0.113.5", IPv6: "2001:db8::1"}
	ref := &hcloud.LoadBalancer{ID: 42}
	_, subnet, _ := net.ParseCIDR("10.0.1.0/24")
	algo := hcloud.LoadBalancerAlgorithmTypeLeastConnections
	create := lbplan.Create{Name: "web", Type: "lb11", Location: "fsn1", Algorithm: &algo, Labels: map[string]string{"a": "b"},
		PublicInterface: true, Network: &lbplan.Attachment{ID: 5}}

	lbTests := []struct {
		name  string
		req   lbplan.Batch
		typed func(context.Context, *hcloud.Client) error
	}{
		{"create with what rides along", lbplan.Batch{Mutation: create, Inline: []lbplan.Mutation{
			lbplan.AddService{Listener: httpsListener}, lbplan.AddService{Listener: tcpListener},
			lbplan.AddTarget{Target: lbplan.Target{ServerID: 101, UsePrivateIP: true}}, lbplan.AddTarget{Target: lbplan.Target{ServerID: 102}},
		}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.Create(ctx, hcloud.LoadBalancerCreateOpts{
				Name: "web", LoadBalancerType: &hcloud.LoadBalancerType{Name: "lb11"}, Location: &hcloud.Location{Name: "fsn1"},
				Algorithm: &hcloud.LoadBalancerAlgorithm{Type: algo}, Labels: map[string]string{"a": "b"}, Network: &hcloud.Network{ID: 5},
				Services: []hcloud.LoadBalancerCreateOptsService{createService(httpsAdd), createService(tcpAdd)},
				Targets: []hcloud.LoadBalancerCreateOptsTarget{
					{Type: "server", Server: hcloud.LoadBalancerCreateOptsTargetServer{Server: &hcloud.Server{ID: 101}}, UsePrivateIP: new(true)},
					{Type: "server", Server: hcloud.LoadBalancerCreateOptsTargetServer{Server: &hcloud.Server{ID: 102}}, UsePrivateIP: new(false)},
				},
			})
			return err
		}},
		{"create private, in a zone", lbplan.Batch{Mutation: lbplan.Create{Name: "p", Type: "lb21", NetworkZone: "eu-central"}},
			func(ctx context.Context, c *hcloud.Client) error {
				_, _, err := c.LoadBalancer.Create(ctx, hcloud.LoadBalancerCreateOpts{Name: "p", LoadBalancerType: &hcloud.LoadBalancerType{Name: "lb21"},
					NetworkZone: "eu-central", PublicInterface: new(false)})
				return err
			}},
		{"update", lbplan.Batch{Mutation: lbplan.Update{Name: "web2", Labels: map[string]string{"x": "y"}}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.Update(ctx, ref, hcloud.LoadBalancerUpdateOpts{Name: "web2", Labels: map[string]string{"x": "y"}})
			return err
		}},
		{"change_type", lbplan.Batch{Mutation: lbplan.ChangeType{Type: "lb21"}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.ChangeType(ctx, ref, hcloud.LoadBalancerChangeTypeOpts{LoadBalancerType: &hcloud.LoadBalancerType{Name: "lb21"}})
			return err
		}},
		{"change_algorithm", lbplan.Batch{Mutation: lbplan.ChangeAlgorithm{Algorithm: algo}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.ChangeAlgorithm(ctx, ref, hcloud.LoadBalancerChangeAlgorithmOpts{Type: algo})
			return err
		}},
		{"change_dns_ptr ipv4", lbplan.Batch{Mutation: lbplan.ChangeDNSPtr{Ptr: "lb.example.com"}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.ChangeDNSPtr(ctx, ref, "203.0.113.5", new("lb.example.com"))
			return err
		}},
		{"change_dns_ptr ipv6", lbplan.Batch{Mutation: lbplan.ChangeDNSPtr{IPv6: true, Ptr: "lb.example.com"}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.ChangeDNSPtr(ctx, ref, "2001:db8::1", new("lb.example.com"))
			return err
		}},
		{"change_protection", lbplan.Batch{Mutation: lbplan.ChangeProtection{Delete: true}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.ChangeProtection(ctx, ref, hcloud.LoadBalancerChangeProtectionOpts{Delete: new(true)})
			return err
		}},
		{"attach_to_network fixed", lbplan.Batch{Mutation: lbplan.AttachNetwork{Network: lbplan.Attachment{ID: 5, IP: net.ParseIP("10.0.1.9"), Subnet: subnet}}},
			func(ctx context.Context, c *hcloud.Client) error {
				_, _, err := c.LoadBalancer.AttachToNetwork(ctx, ref, hcloud.LoadBalancerAttachToNetworkOpts{Network: &hcloud.Network{ID: 5}, IP: net.ParseIP("10.0.1.9"), IPRange: subnet})
				return err
			}},
		{"attach_to_network", lbplan.Batch{Mutation: lbplan.AttachNetwork{Network: lbplan.Attachment{ID: 5}}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.AttachToNetwork(ctx, ref, hcloud.LoadBalancerAttachToNetworkOpts{Network: &hcloud.Network{ID: 5}})
			return err
		}},
		{"detach_from_network", lbplan.Batch{Mutation: lbplan.DetachNetwork{NetworkID: 5}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.DetachFromNetwork(ctx, ref, hcloud.LoadBalancerDetachFromNetworkOpts{Network: &hcloud.Network{ID: 5}})
			return err
		}},
		{"enable_public_interface", lbplan.Batch{Mutation: lbplan.EnablePublicInterface{}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.EnablePublicInterface(ctx, ref)
			return err
		}},
		{"disable_public_interface", lbplan.Batch{Mutation: lbplan.DisablePublicInterface{}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.DisablePublicInterface(ctx, ref)
			return err
		}},
		{"add_service https", lbplan.Batch{Mutation: lbplan.AddService{Listener: httpsListener}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.AddService(ctx, ref, httpsAdd)
			return err
		}},
		{"add_service tcp", lbplan.Batch{Mutation: lbplan.AddService{Listener: tcpListener}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.AddService(ctx, ref, tcpAdd)
			return err
		}},
		{"update_service https", lbplan.Batch{Mutation: lbplan.UpdateService{Listener: httpsListener}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.UpdateService(ctx, ref, 443, httpsUpdate)
			return err
		}},
		{"update_service tcp", lbplan.Batch{Mutation: lbplan.UpdateService{Listener: tcpListener}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.UpdateService(ctx, ref, 80, tcpUpdate)
			return err
		}},
		{"delete_service", lbplan.Batch{Mutation: lbplan.DeleteService{ListenPort: 80}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.DeleteService(ctx, ref, 80)
			return err
		}},
		{"add_target", lbplan.Batch{Mutation: lbplan.AddTarget{Target: lbplan.Target{ServerID: 101, UsePrivateIP: true}}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.AddServerTarget(ctx, ref, hcloud.LoadBalancerAddServerTargetOpts{Server: &hcloud.Server{ID: 101}, UsePrivateIP: new(true)})
			return err
		}},
		{"remove_target", lbplan.Batch{Mutation: lbplan.RemoveTarget{Target: lbplan.Target{ServerID: 101}}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.RemoveServerTarget(ctx, ref, &hcloud.Server{ID: 101})
			return err
		}},
		{"add_target ip", lbplan.Batch{Mutation: lbplan.AddIPTarget{Target: lbplan.IPTarget{IP: "198.51.100.7"}}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.AddIPTarget(ctx, ref, hcloud.LoadBalancerAddIPTargetOpts{IP: net.ParseIP("198.51.100.7")})
			return err
		}},
		{"remove_target ip", lbplan.Batch{Mutation: lbplan.RemoveIPTarget{IP: "2001:db8:0:0::7"}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.RemoveIPTarget(ctx, ref, net.ParseIP("2001:db8:0:0::7"))
			return err
		}},
		{"create_managed_certificate", lbplan.Batch{Mutation: lbplan.CreateManagedCertificate{Certificate: lbplan.ManagedCertificate{
			Name: "c", Domains: []string{"a.example.com", "b.example.com"}, Labels: map[string]string{"k": "v"}}}},
			func(ctx context.Context, c *hcloud.Client) error {
				_, _, err := c.Certificate.CreateCertificate(ctx, hcloud.CertificateCreateOpts{Name: "c", Type: hcloud.CertificateTypeManaged,
					DomainNames: []string{"a.example.com", "b.example.com"}, Labels: map[string]string{"k": "v"}})
				return err
			}},
		{"delete", lbplan.Batch{Mutation: lbplan.Delete{Name: "web"}}, func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.LoadBalancer.DeleteWithResult(ctx, ref)
			return err
		}},
	}
	covered := map[string]bool{}
	used := map[apireq.Endpoint]bool{}
	vetted := func(m step, api apireq.Request, id int64) error {
		if err := vetRequest(m, api, id); err != nil {
			return err
		}
		ep, _, _ := apireq.Of(api.Method, api.Path)
		used[ep] = true
		return nil
	}
	for _, tt := range lbTests {
		t.Run(tt.name, func(t *testing.T) {
			for _, m := range tt.req.Mutations() {
				covered[typeName(m)] = true
			}
			ours, theirs := sendBoth(t, func(x *Executor) (*http.Request, error) {
				api, err := tt.req.API(lb, certID)
				if err != nil {
					return nil, err
				}
				if err := vetted(tt.req.Mutation, api, lb.ID); err != nil {
					return nil, err
				}
				return x.newRequest(context.Background(), api)
			}, tt.typed)
			if ours != theirs {
				t.Errorf("request differs from hcloud-go's\n ours:   %+v\n theirs: %+v", ours, theirs)
			}
		})
	}
	for _, k := range lbplan.Kinds() {
		if !covered[typeName(k)] {
			t.Errorf("%s has no case in this table", typeName(k))
		}
	}

	route := routeplan.Route{Destination: netip.MustParsePrefix("10.244.1.0/24"), Gateway: netip.MustParseAddr("10.0.0.2")}
	hroute := hcloud.NetworkRoute{Destination: &net.IPNet{IP: net.IP{10, 244, 1, 0}, Mask: net.CIDRMask(24, 32)}, Gateway: net.IP{10, 0, 0, 2}}
	routeTests := []struct {
		name  string
		m     routeplan.Mutation
		typed func(context.Context, *hcloud.Client) error
	}{
		{"add_route", routeplan.Add(route), func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.Network.AddRoute(ctx, &hcloud.Network{ID: 5}, hcloud.NetworkAddRouteOpts{Route: hroute})
			return err
		}},
		{"delete_route", routeplan.Delete(route), func(ctx context.Context, c *hcloud.Client) error {
			_, _, err := c.Network.DeleteRoute(ctx, &hcloud.Network{ID: 5}, hcloud.NetworkDeleteRouteOpts{Route: hroute})
			return err
		}},
	}
	for _, tt := range routeTests {
		t.Run(tt.name, func(t *testing.T) {
			covered[typeName(tt.m)] = true
			ours, theirs := sendBoth(t, func(x *Executor) (*http.Request, error) {
				if err := vetted(tt.m, tt.m.Request(5), 5); err != nil {
					return nil, err
				}
				return x.newRequest(context.Background(), tt.m.Request(5))
			}, tt.typed)
			if ours != theirs {
				t.Errorf("request differs from hcloud-go's\n ours:   %+v\n theirs: %+v", ours, theirs)
			}
		})
	}
	for _, k := range routeplan.Kinds() {
		if !covered[typeName(k)] {
			t.Errorf("%s has no case in this table", typeName(k))
		}
	}
	for _, ep := range apireq.Endpoints() {
		if !used[ep] {
			t.Errorf("no kind sends %s %s (%s): remove it from apireq.Endpoints or add its kind", ep.Method, ep.Pattern, ep.Operation)
		}
	}
}

// typeName is the package-qualified name of m's type (lbplan.Delete, routeplan.Delete).
func typeName(m any) string { return fmt.Sprintf("%T", m) }

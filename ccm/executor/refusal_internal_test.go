package executor

import (
	"errors"
	"strings"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// invalidInput is an invalid_input refusal naming fields, as hcloud-go decodes it.
func invalidInput(fields ...string) hcloud.Error {
	d := hcloud.ErrorDetailsInvalidInput{}
	for _, f := range fields {
		d.Fields = append(d.Fields, hcloud.ErrorDetailsInvalidInputField{Name: f, Messages: []string{"is invalid"}})
	}
	return hcloud.Error{Code: hcloud.ErrorCodeInvalidInput, Message: "invalid input", Details: d}
}

// labelOnly is a mutation of no kind with a label, for hints that do not depend on the kind.
type labelOnly string

func (l labelOnly) Label() string   { return string(l) }
func (labelOnly) Action() string    { return "" }
func (labelOnly) Operation() string { return "" }

func TestAnnotationHints(t *testing.T) {
	const p = "load-balancer.hetzner.cloud/"
	tests := []struct {
		m    step // a kind when the hint depends on it, else labelOnly
		err  error
		want string // comma separated, without the prefix
	}{
		// one row per fieldAnnotations key (checked below)
		{labelOnly("update(lb)"), invalidInput("name"), "name"},
		{labelOnly("create(lb)"), invalidInput("load_balancer_type"), "type"},
		{labelOnly("create(lb)"), invalidInput("location"), "location"},
		{labelOnly("create(lb)"), invalidInput("network_zone"), "network-zone"},
		{labelOnly("create(lb)"), invalidInput("algorithm"), "algorithm-type"},
		{labelOnly("create(lb)"), invalidInput("algorithm.type"), "algorithm-type"},
		{labelOnly("create(lb)"), invalidInput("public_interface"), "disable-public-network"},
		{labelOnly("attach_to_network(5)"), invalidInput("ip_range"), "private-subnet-ip-range"},
		{labelOnly("create(lb)"), invalidInput("targets[0].use_private_ip"), "use-private-ip"},
		{labelOnly("add_service(443)"), invalidInput("protocol"), "protocol"},
		{labelOnly("add_service(443)"), invalidInput("proxyprotocol"), "uses-proxyprotocol"},
		{labelOnly("add_service(443)"), invalidInput("http"), "protocol"},
		{labelOnly("add_service(443)"), invalidInput("http.cookie_name"), "http-cookie-name"},
		{labelOnly("add_service(443)"), invalidInput("http.cookie_lifetime"), "http-cookie-lifetime"},
		{labelOnly("update_service(443)"), invalidInput("http.timeout_idle"), "http-timeout-idle"},
		{labelOnly("add_service(443)"), invalidInput("http.certificates"), "http-certificates"},
		{labelOnly("add_service(443)"), invalidInput("http.redirect_http"), "http-redirect-http"},
		{labelOnly("add_service(443)"), invalidInput("http.sticky_sessions"), "http-sticky-sessions"},
		{labelOnly("add_service(80)"), invalidInput("health_check.protocol"), "health-check-protocol"},
		{labelOnly("add_service(80)"), invalidInput("health_check.port"), "health-check-port"},
		{labelOnly("add_service(80)"), invalidInput("health_check.interval"), "health-check-interval"},
		{labelOnly("add_service(80)"), invalidInput("health_check.timeout"), "health-check-timeout"},
		{labelOnly("add_service(80)"), invalidInput("health_check.retries"), "health-check-retries"},
		{labelOnly("add_service(80)"), invalidInput("health_check.http"), "health-check-protocol"},
		{labelOnly("add_service(80)"), invalidInput("health_check.http.domain"), "health-check-http-domain"},
		{labelOnly("add_service(80)"), invalidInput("health_check.http.path"), "health-check-http-path"},
		{labelOnly("add_service(80)"), invalidInput("health_check.http.status_codes"), "http-status-codes"},
		{labelOnly("add_service(80)"), invalidInput("health_check.http.tls"), "health-check-http-validate-certificate"},
		// paths of the create request, several fields, fields no annotation sets
		{labelOnly("create(lb)"), invalidInput("services[0].health_check.interval"), "health-check-interval"},
		{labelOnly("create(lb)"), invalidInput("services[1].health_check.retries", "services[0].http.timeout_idle", "services[1].health_check.retries"), "health-check-retries,http-timeout-idle"},
		{labelOnly("add_service(80)"), invalidInput("listen_port"), ""},
		{labelOnly("create(lb)"), invalidInput("labels", "network"), ""},
		// fields whose annotation depends on the mutation
		{lbplan.AttachNetwork{}, invalidInput("ip"), "private-ipv4"},
		{lbplan.ChangeDNSPtr{}, invalidInput("dns_ptr"), "ipv4-rdns"},
		{lbplan.ChangeDNSPtr{IPv6: true}, invalidInput("dns_ptr"), "ipv6-rdns"},
		{lbplan.ChangeDNSPtr{IPv6: true}, invalidInput("ip"), "ipv6-rdns"},
		{lbplan.ChangeAlgorithm{}, invalidInput("type"), "algorithm-type"},
		{lbplan.ChangeType{}, invalidInput("type"), "type"},
		{labelOnly("add_target(ip:1.2.3.4)"), invalidInput("ip.ip"), ""},
		// codes
		{labelOnly("add_target(server:1)"), hcloud.Error{Code: hcloud.ErrorCodeTargetsWithoutUsePrivateIP}, "use-private-ip"},
		{labelOnly("disable_public_interface"), hcloud.Error{Code: hcloud.ErrorCodeLoadBalancerNotAttachedToNetwork}, "disable-public-network"},
		{labelOnly("add_target(server:1)"), hcloud.Error{Code: "load_balancer_public_interface_disabled"}, "disable-public-network"},
		{labelOnly("change_type(lb21)"), hcloud.Error{Code: hcloud.ErrorCodeInvalidLoadBalancerType}, "type"},
		{labelOnly("attach_to_network(5)"), hcloud.Error{Code: hcloud.ErrorCodeIPNotAvailable}, "private-ipv4"},
		{labelOnly("attach_to_network(5)"), hcloud.Error{Code: hcloud.ErrorCodeNoSubnetAvailable}, "private-subnet-ip-range"},
		{labelOnly("add_service(80)"), hcloud.Error{Code: hcloud.ErrorCodeRateLimitExceeded, Message: "certificate"}, ""},
		// refusals without fields: whole words of the message
		{labelOnly("add_service(443)"), hcloud.Error{Code: hcloud.ErrorCodeInvalidInput, Message: "certificate 999 not found"}, "http-certificates"},
		{labelOnly("add_service(443)"), hcloud.Error{Code: hcloud.ErrorCodeNotFound, Message: "certificate with ID '9' not found"}, "http-certificates"},
		{labelOnly("add_service(80)"), hcloud.Error{Code: hcloud.ErrorCodeInvalidInput, Message: "multiple problems"}, ""},
		{labelOnly("add_service(80)"), hcloud.Error{Code: hcloud.ErrorCodeInvalidInput, Message: "health_check is invalid"}, ""},
		{labelOnly("add_service(80)"), errors.New("certificate"), ""},
	}
	covered := map[string]bool{}
	for _, tc := range tests {
		var herr hcloud.Error
		if errors.As(tc.err, &herr) {
			if d, ok := herr.Details.(hcloud.ErrorDetailsInvalidInput); ok && len(d.Fields) == 1 {
				covered[d.Fields[0].Name] = true
			}
		}
		t.Run(tc.m.Label()+" "+tc.err.Error()+" "+tc.want, func(t *testing.T) {
			var got []string
			for _, n := range annotationHints(tc.m, tc.err) {
				got = append(got, strings.TrimPrefix(string(n), p))
			}
			if g := strings.Join(got, ","); g != tc.want {
				t.Errorf("annotationHints(%q) = %q, want %q", tc.m.Label(), g, tc.want)
			}
		})
	}
	for key := range fieldAnnotations {
		if !covered[key] && !covered["targets[0]."+key] {
			t.Errorf("fieldAnnotations[%q] has no row of its own", key)
		}
	}
}

func TestWrapAPIError(t *testing.T) {
	tests := []struct {
		name string
		m    step
		err  hcloud.Error
		want string
	}{
		{"fields and annotation", labelOnly("update_service(443)"), hcloud.Error{Code: hcloud.ErrorCodeInvalidInput, Message: "invalid input in field 'http.timeout_idle'", Details: hcloud.ErrorDetailsInvalidInput{
			Fields: []hcloud.ErrorDetailsInvalidInputField{{Name: "http.timeout_idle", Messages: []string{"must be between 30 and 300 seconds", "100% wrong"}}}}},
			`update_service(443): invalid input in field 'http.timeout_idle' (invalid_input): invalid fields: http.timeout_idle (must be between 30 and 300 seconds, 100% wrong) (check "load-balancer.hetzner.cloud/http-timeout-idle")`},
		{"a code only", labelOnly("add_target(server:1)"), hcloud.Error{Code: hcloud.ErrorCodeTargetsWithoutUsePrivateIP, Message: "targets without use_private_ip"},
			`add_target(server:1): targets without use_private_ip (targets_without_use_private_ip) (check "load-balancer.hetzner.cloud/use-private-ip")`},
		{"nothing to add", labelOnly("delete(lb)"), hcloud.Error{Code: hcloud.ErrorCodeServerError, Message: "boom"}, `delete(lb): boom (server_error)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := wrapAPIError(tc.m, tc.err)
			if err.Error() != tc.want {
				t.Errorf("wrapAPIError() = %q\nwant %q", err, tc.want)
			}
			var herr hcloud.Error
			if !errors.As(err, &herr) || herr.Code != tc.err.Code {
				t.Errorf("wrapAPIError() does not wrap the API error")
			}
		})
	}
}

package hcloudemu_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// describedHost is the server of the description; requests are matched
// against it with the emulator's path and query.
const describedHost = "https://api.hetzner.cloud"

// tally counts the replies of one operation that were validated.
type tally struct{ responses, refusals int }

// contract is an http.RoundTripper that sends every /v1 request to the
// emulator and validates the exchange against the description: a 2xx reply's
// request and response, a refusal's (4xx) response with its error body.
// Admin requests (/_emu/) pass unchecked. Problems are test errors.
type contract struct {
	t *testing.T
	d *described

	mu   sync.Mutex
	seen map[string]*tally // by operation, "GET /servers/{id}"
}

func newContract(t *testing.T) *contract {
	return &contract{t: t, d: loadDescription(t), seen: map[string]*tally{}}
}

// RoundTrip sends req and validates the exchange.
func (c *contract) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, fmt.Errorf("contract: read request body: %w", err)
		}
		reqBody = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || strings.HasPrefix(req.URL.Path, "/_emu/") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("contract: read response body: %w", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	op, errs := c.check(req, reqBody, resp, body)
	for _, err := range errs {
		c.t.Errorf("%s %s: %v", req.Method, req.URL.RequestURI(), err)
	}
	if op != "" {
		c.count(op, resp.StatusCode >= 400)
	}
	return resp, nil
}

// check validates one exchange against the description and returns its
// operation ("GET /servers/{id}", "" when the description has none) and
// what does not match.
func (c *contract) check(req *http.Request, reqBody []byte, resp *http.Response, body []byte) (string, []error) {
	path, ok := strings.CutPrefix(req.URL.Path, "/v1")
	if !ok {
		return "", []error{errors.New("not under /v1")}
	}
	u, err := url.Parse(describedHost + "/v1" + path + "?" + req.URL.RawQuery)
	if err != nil {
		return "", []error{err}
	}
	vreq := req.Clone(context.Background())
	vreq.URL, vreq.Host = u, u.Host
	vreq.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := c.d.router.FindRoute(vreq)
	if err != nil {
		return "", []error{fmt.Errorf("no operation in the description: %w", err)}
	}
	opts := &openapi3filter.Options{
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true,
		MultiError:            true,
		// Errors name the failing value and its JSON pointer, not the whole
		// schema (some run to thousands of lines).
		SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.DisableSchemaErrorDetails()},
	}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: opts}
	var errs []error
	if resp.StatusCode < 400 {
		// What the emulator accepts, the description must accept.
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			errs = append(errs, fmt.Errorf("accepted request does not match the description: %w\nbody: %s", err, reqBody))
		}
	}
	if err := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(body)), Options: opts,
	}); err != nil {
		errs = append(errs, fmt.Errorf("%d reply does not match the description: %w\nbody: %s", resp.StatusCode, err, body))
	}
	if err := checkBodyPresence(route.Operation.Responses.Status(resp.StatusCode), resp, body); err != nil {
		errs = append(errs, err)
	}
	return route.Method + " " + route.Path, errs
}

func (c *contract) count(op string, refused bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tl := c.seen[op]
	if tl == nil {
		tl = &tally{}
		c.seen[op] = tl
	}
	if refused {
		tl.refusals++
	} else {
		tl.responses++
	}
}

// tallyOf returns the counts of op.
func (c *contract) tallyOf(op string) tally {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tl := c.seen[op]; tl != nil {
		return *tl
	}
	return tally{}
}

// checkBodyPresence checks what kin-openapi leaves out: a reply the
// description gives no content (204) has no body, and one with content has a
// JSON body. want is the described response (nil: none, reported elsewhere).
func checkBodyPresence(want *openapi3.ResponseRef, resp *http.Response, body []byte) error {
	if want == nil || want.Value == nil {
		return nil
	}
	switch described := len(want.Value.Content) > 0; {
	case !described && len(body) > 0:
		return fmt.Errorf("%d reply has a body, the description none: %s", resp.StatusCode, body)
	case described && len(body) == 0:
		return fmt.Errorf("%d reply has no body, the description has one", resp.StatusCode)
	case described && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"):
		return fmt.Errorf("%d reply has Content-Type %q, want application/json", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return nil
}

// step is one request of the scenario. Path and body may name values saved
// by earlier steps ({lb}, {cert}, {action}) and the world's IDs ({network},
// {server1}..{server3}). A refusal names the error code it expects.
type step struct {
	name         string
	method, path string
	body         string
	status       int
	code         string            // error.code of a refusal
	token        string            // "" = the emulator's token
	save         map[string]string // variable → JSON path in the reply, e.g. "load_balancer.id"
}

// run sends s and checks its status, error code and saved values.
func (s step) run(t *testing.T, client *http.Client, endpoint, token string, vars map[string]string) {
	t.Helper()
	pairs := make([]string, 0, 2*len(vars))
	for k, v := range vars {
		pairs = append(pairs, "{"+k+"}", v)
	}
	fill := strings.NewReplacer(pairs...).Replace
	base := strings.TrimSuffix(endpoint, "/v1")
	var body io.Reader
	if s.body != "" {
		body = strings.NewReader(fill(s.body))
	}
	req, err := http.NewRequest(s.method, base+fill(s.path), body)
	if err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	req.Header.Set("Authorization", "Bearer "+orString(s.token, token))
	if s.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != s.status {
		t.Fatalf("%s: %s %s = %d %s, want %d", s.name, s.method, fill(s.path), resp.StatusCode, got, s.status)
	}
	if s.code != "" {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		if err := json.Unmarshal(got, &e); err != nil || e.Error.Code != s.code {
			t.Errorf("%s: error code = %q (%v), want %q", s.name, e.Error.Code, err, s.code)
		}
	}
	for k, p := range s.save {
		v, err := jsonAt(got, p)
		if err != nil {
			t.Fatalf("%s: save %s: %v", s.name, k, err)
		}
		vars[k] = v
	}
}

func orString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// jsonAt returns the value at a dotted path ("load_balancer.id",
// "actions.0.id") of a JSON document, formatted for a URL.
func jsonAt(doc []byte, path string) (string, error) {
	var v any
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return "", fmt.Errorf("decode: %w", err)
	}
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(x) {
				return "", fmt.Errorf("no element %s in %s", k, path)
			}
			v = x[i]
		default:
			return "", fmt.Errorf("no %s in %s", k, path)
		}
	}
	if v == nil {
		return "", fmt.Errorf("%s is absent or null", path)
	}
	return fmt.Sprint(v), nil
}

// scenario drives every endpoint of the emulator: each route of the route
// table answers at least once, and most refuse once.
var scenario = []step{
	// Catalog.
	{name: "list locations", method: "GET", path: "/v1/locations", status: 200},
	{name: "get a location", method: "GET", path: "/v1/locations/1", status: 200},
	{name: "unknown location", method: "GET", path: "/v1/locations/999", status: 404, code: "not_found"},
	{name: "list server types", method: "GET", path: "/v1/server_types?name=cx22", status: 200, save: map[string]string{"st": "server_types.0.id"}},
	{name: "get a server type", method: "GET", path: "/v1/server_types/{st}", status: 200},
	{name: "unknown server type", method: "GET", path: "/v1/server_types/999", status: 404, code: "not_found"},
	{name: "list load balancer types", method: "GET", path: "/v1/load_balancer_types", status: 200},
	{name: "get a load balancer type", method: "GET", path: "/v1/load_balancer_types/2", status: 200},
	{name: "unknown load balancer type", method: "GET", path: "/v1/load_balancer_types/999", status: 404, code: "not_found"},
	{name: "datacenters are gone", method: "GET", path: "/v1/datacenters?sort=name", status: 410, code: "deprecated_api_endpoint"},
	{name: "a datacenter is gone", method: "GET", path: "/v1/datacenters/1", status: 410, code: "deprecated_api_endpoint"},
	{name: "wrong token", method: "GET", path: "/v1/locations", token: "wrong", status: 401, code: "unauthorized"},

	// Servers.
	{name: "list servers", method: "GET", path: "/v1/servers", status: 200},
	{name: "second page of servers", method: "GET", path: "/v1/servers?page=2&per_page=1&sort=name:desc", status: 200},
	{name: "servers by label", method: "GET", path: "/v1/servers?label_selector=role%3Dworker&status=running", status: 200},
	{name: "invalid label selector", method: "GET", path: "/v1/servers?label_selector=role+in+(", status: 422, code: "invalid_input"},
	{name: "get a server", method: "GET", path: "/v1/servers/{server1}", status: 200},
	{name: "unknown server", method: "GET", path: "/v1/servers/999", status: 404, code: "not_found"},
	{name: "server actions", method: "GET", path: "/v1/servers/{server1}/actions", status: 200},
	{name: "actions of an unknown server", method: "GET", path: "/v1/servers/999/actions", status: 404, code: "not_found"},

	// Networks and routes.
	{name: "list networks", method: "GET", path: "/v1/networks?name=k8s", status: 200},
	{name: "get a network", method: "GET", path: "/v1/networks/{network}", status: 200},
	{name: "rename a network", method: "PUT", path: "/v1/networks/{network}", body: `{"name":"k8s-net","labels":{"env":"test"}}`, status: 200},
	{name: "bad network name", method: "PUT", path: "/v1/networks/{network}", body: `{"name":" spaced "}`, status: 422, code: "invalid_input"},
	{name: "add a route", method: "POST", path: "/v1/networks/{network}/actions/add_route", body: `{"destination":"10.100.1.0/24","gateway":"10.0.0.2"}`, status: 201},
	{name: "route with a bad CIDR", method: "POST", path: "/v1/networks/{network}/actions/add_route", body: `{"destination":"10.100.1.0/33","gateway":"10.0.0.2"}`, status: 422, code: "invalid_input"},
	{name: "delete the route", method: "POST", path: "/v1/networks/{network}/actions/delete_route", body: `{"destination":"10.100.1.0/24","gateway":"10.0.0.2"}`, status: 201},
	{name: "delete a missing route", method: "POST", path: "/v1/networks/{network}/actions/delete_route", body: `{"destination":"10.100.9.0/24","gateway":"10.0.0.2"}`, status: 404, code: "not_found"},
	{name: "protect the network", method: "POST", path: "/v1/networks/{network}/actions/change_protection", body: `{"delete":false}`, status: 201},
	{name: "protection of the wrong type", method: "POST", path: "/v1/networks/{network}/actions/change_protection", body: `{"delete":"yes"}`, status: 400, code: "json_error"},
	{name: "network actions", method: "GET", path: "/v1/networks/{network}/actions?sort=id:desc", status: 200},
	{name: "actions of an unknown network", method: "GET", path: "/v1/networks/999/actions", status: 404, code: "not_found"},

	// Certificates.
	{name: "create a managed certificate", method: "POST", path: "/v1/certificates", body: `{"name":"shop","type":"managed","domain_names":["shop.example.com"]}`, status: 201, save: map[string]string{"cert": "certificate.id"}},
	{name: "managed certificate without domains", method: "POST", path: "/v1/certificates", body: `{"name":"empty","type":"managed","domain_names":[]}`, status: 422, code: "invalid_input"},
	{name: "taken certificate name", method: "POST", path: "/v1/certificates", body: `{"name":"shop","type":"managed","domain_names":["a.example.com"]}`, status: 409, code: "uniqueness_error"},
	{name: "list certificates", method: "GET", path: "/v1/certificates?type=managed", status: 200},
	{name: "get a certificate", method: "GET", path: "/v1/certificates/{cert}", status: 200},
	{name: "unknown certificate", method: "GET", path: "/v1/certificates/999", status: 404, code: "not_found"},
	{name: "rename the certificate", method: "PUT", path: "/v1/certificates/{cert}", body: `{"name":"shop-2","labels":{}}`, status: 200},
	{name: "bad certificate label", method: "PUT", path: "/v1/certificates/{cert}", body: `{"labels":{"-bad":"x"}}`, status: 422, code: "invalid_input"},

	// Load balancers.
	{name: "create without a name", method: "POST", path: "/v1/load_balancers", body: `{"load_balancer_type":"lb11","location":"fsn1"}`, status: 422, code: "invalid_input"},
	{name: "create with an unknown type", method: "POST", path: "/v1/load_balancers", body: `{"name":"web","load_balancer_type":"lb99","location":"fsn1"}`, status: 422, code: "invalid_input"},
	{name: "create with an unknown algorithm", method: "POST", path: "/v1/load_balancers", body: `{"name":"web","load_balancer_type":"lb11","location":"fsn1","algorithm":{"type":"random"}}`, status: 422, code: "invalid_input"},
	{name: "create with a name of the wrong type", method: "POST", path: "/v1/load_balancers", body: `{"name":5,"load_balancer_type":"lb11","location":"fsn1"}`, status: 400, code: "json_error"},
	{name: "create a load balancer", method: "POST", path: "/v1/load_balancers", body: `{"name":"web","load_balancer_type":"lb11","location":"fsn1","labels":{"app":"web"},"algorithm":{"type":"round_robin"},"public_interface":true,
		"services":[{"protocol":"tcp","listen_port":443,"destination_port":30443,"proxyprotocol":false,"health_check":{"protocol":"tcp","port":30443,"interval":15,"timeout":10,"retries":3}}],
		"targets":[{"type":"server","server":{"id":{server1}},"use_private_ip":false}]}`, status: 201,
		save: map[string]string{"lb": "load_balancer.id", "action": "action.id", "lbip": "load_balancer.public_net.ipv4.ip"}},
	{name: "taken load balancer name", method: "POST", path: "/v1/load_balancers", body: `{"name":"web","load_balancer_type":"lb11","location":"fsn1"}`, status: 409, code: "uniqueness_error"},
	{name: "list load balancers", method: "GET", path: "/v1/load_balancers?label_selector=app%3Dweb&sort=created:desc", status: 200},
	{name: "load balancers with an invalid selector", method: "GET", path: "/v1/load_balancers?label_selector=a%3D%3D%3Db", status: 422, code: "invalid_input"},
	{name: "get the load balancer", method: "GET", path: "/v1/load_balancers/{lb}", status: 200},
	{name: "unknown load balancer", method: "GET", path: "/v1/load_balancers/999", status: 404, code: "not_found"},
	{name: "rename the load balancer", method: "PUT", path: "/v1/load_balancers/{lb}", body: `{"name":"web-2","labels":{"app":"web"}}`, status: 200},
	{name: "rename to an invalid name", method: "PUT", path: "/v1/load_balancers/{lb}", body: `{"name":""}`, status: 422, code: "invalid_input"},
	{name: "attach to the network", method: "POST", path: "/v1/load_balancers/{lb}/actions/attach_to_network", body: `{"network":{network},"ip":"10.0.0.50"}`, status: 201},
	{name: "attach twice", method: "POST", path: "/v1/load_balancers/{lb}/actions/attach_to_network", body: `{"network":{network}}`, status: 422, code: "load_balancer_already_attached"},
	{name: "add an http service", method: "POST", path: "/v1/load_balancers/{lb}/actions/add_service", body: `{"protocol":"http","listen_port":80,"destination_port":30080,"proxyprotocol":false,
		"http":{"cookie_name":"HCLBSTICKY","cookie_lifetime":300,"sticky_sessions":true,"timeout_idle":60},
		"health_check":{"protocol":"http","port":30080,"interval":15,"timeout":10,"retries":3,"http":{"domain":"shop.example.com","path":"/healthz","status_codes":["2??"],"tls":false}}}`, status: 201},
	{name: "add an https service", method: "POST", path: "/v1/load_balancers/{lb}/actions/add_service", body: `{"protocol":"https","listen_port":8443,"destination_port":30080,"proxyprotocol":false,
		"http":{"certificates":[{cert}],"redirect_http":false},"health_check":{"protocol":"tcp","port":30080,"interval":15,"timeout":10,"retries":3}}`, status: 201},
	{name: "service with an unknown protocol", method: "POST", path: "/v1/load_balancers/{lb}/actions/add_service", body: `{"protocol":"udp","listen_port":53,"destination_port":53,"proxyprotocol":false}`, status: 422, code: "invalid_input"},
	{name: "service on a taken port", method: "POST", path: "/v1/load_balancers/{lb}/actions/add_service", body: `{"protocol":"tcp","listen_port":80,"destination_port":30080,"proxyprotocol":false}`, status: 412, code: "source_port_already_used"},
	{name: "service on a port out of range", method: "POST", path: "/v1/load_balancers/{lb}/actions/add_service", body: `{"protocol":"tcp","listen_port":70000,"destination_port":30080,"proxyprotocol":false}`, status: 422, code: "invalid_input"},
	{name: "service without a listen port", method: "POST", path: "/v1/load_balancers/{lb}/actions/add_service", body: `{"protocol":"tcp"}`, status: 422, code: "invalid_input"},
	{name: "update a service", method: "POST", path: "/v1/load_balancers/{lb}/actions/update_service", body: `{"listen_port":443,"destination_port":30444,"health_check":{"protocol":"tcp","port":30444,"interval":10,"timeout":5,"retries":2}}`, status: 201},
	{name: "update a missing service", method: "POST", path: "/v1/load_balancers/{lb}/actions/update_service", body: `{"listen_port":9999,"destination_port":1}`, status: 404, code: "not_found"},
	{name: "add a private server target", method: "POST", path: "/v1/load_balancers/{lb}/actions/add_target", body: `{"type":"server","server":{"id":{server2}},"use_private_ip":true}`, status: 201},
	{name: "add a label selector target", method: "POST", path: "/v1/load_balancers/{lb}/actions/add_target", body: `{"type":"label_selector","label_selector":{"selector":"role=control-plane"},"use_private_ip":true}`, status: 201},
	{name: "add an ip target", method: "POST", path: "/v1/load_balancers/{lb}/actions/add_target", body: `{"type":"ip","ip":{"ip":"192.0.2.77"}}`, status: 201},
	{name: "the load balancer with every kind of service and target", method: "GET", path: "/v1/load_balancers/{lb}", status: 200},
	{name: "the same target twice", method: "POST", path: "/v1/load_balancers/{lb}/actions/add_target", body: `{"type":"ip","ip":{"ip":"192.0.2.77"}}`, status: 422, code: "target_already_defined"},
	{name: "target with a bad IP", method: "POST", path: "/v1/load_balancers/{lb}/actions/add_target", body: `{"type":"ip","ip":{"ip":"192.0.2.300"}}`, status: 422, code: "invalid_input"},
	{name: "target naming an unknown server", method: "POST", path: "/v1/load_balancers/{lb}/actions/add_target", body: `{"type":"server","server":{"id":999}}`, status: 422, code: "invalid_input"},
	{name: "remove the ip target", method: "POST", path: "/v1/load_balancers/{lb}/actions/remove_target", body: `{"type":"ip","ip":{"ip":"192.0.2.77"}}`, status: 201},
	{name: "remove a missing target", method: "POST", path: "/v1/load_balancers/{lb}/actions/remove_target", body: `{"type":"ip","ip":{"ip":"192.0.2.78"}}`, status: 404, code: "not_found"},
	{name: "remove the public server target", method: "POST", path: "/v1/load_balancers/{lb}/actions/remove_target", body: `{"type":"server","server":{"id":{server1}}}`, status: 201},
	{name: "change the algorithm", method: "POST", path: "/v1/load_balancers/{lb}/actions/change_algorithm", body: `{"type":"least_connections"}`, status: 201},
	{name: "unknown algorithm", method: "POST", path: "/v1/load_balancers/{lb}/actions/change_algorithm", body: `{"type":"random"}`, status: 422, code: "invalid_input"},
	{name: "change the type", method: "POST", path: "/v1/load_balancers/{lb}/actions/change_type", body: `{"load_balancer_type":"lb21"}`, status: 201},
	{name: "change to an unknown type", method: "POST", path: "/v1/load_balancers/{lb}/actions/change_type", body: `{"load_balancer_type":"lb99"}`, status: 422, code: "invalid_load_balancer_type"},
	{name: "change the reverse DNS", method: "POST", path: "/v1/load_balancers/{lb}/actions/change_dns_ptr", body: `{"ip":"{lbip}","dns_ptr":"web.example.com"}`, status: 201},
	{name: "reverse DNS with a bad IP", method: "POST", path: "/v1/load_balancers/{lb}/actions/change_dns_ptr", body: `{"ip":"not-an-ip","dns_ptr":"web.example.com"}`, status: 422, code: "invalid_input"},
	{name: "disable the public interface", method: "POST", path: "/v1/load_balancers/{lb}/actions/disable_public_interface", status: 201},
	{name: "public target while the interface is disabled", method: "POST", path: "/v1/load_balancers/{lb}/actions/add_target", body: `{"type":"server","server":{"id":{server3}},"use_private_ip":false}`, status: 422, code: "load_balancer_public_interface_disabled"},
	{name: "enable the public interface", method: "POST", path: "/v1/load_balancers/{lb}/actions/enable_public_interface", status: 201},
	{name: "protect the load balancer", method: "POST", path: "/v1/load_balancers/{lb}/actions/change_protection", body: `{"delete":true}`, status: 201, save: map[string]string{"action": "action.id"}},
	{name: "delete while protected", method: "DELETE", path: "/v1/load_balancers/{lb}", status: 423, code: "protected"},
	{name: "unprotect it", method: "POST", path: "/v1/load_balancers/{lb}/actions/change_protection", body: `{"delete":false}`, status: 201},
	{name: "metrics", method: "GET", path: "/v1/load_balancers/{lb}/metrics?type=open_connections&type=bandwidth&start=2026-11-01T00:00:00Z&end=2026-11-01T01:00:00Z&step=60", status: 200},
	{name: "metrics without a type", method: "GET", path: "/v1/load_balancers/{lb}/metrics?start=2026-11-01T00:00:00Z&end=2026-11-01T01:00:00Z", status: 422, code: "invalid_input"},
	{name: "metrics of an unknown type", method: "GET", path: "/v1/load_balancers/{lb}/metrics?type=latency&start=2026-11-01T00:00:00Z&end=2026-11-01T01:00:00Z", status: 422, code: "invalid_input"},
	{name: "load balancer actions", method: "GET", path: "/v1/load_balancers/{lb}/actions?status=success&sort=command", status: 200},
	{name: "actions of an unknown load balancer", method: "GET", path: "/v1/load_balancers/999/actions", status: 404, code: "not_found"},
	{name: "actions by id", method: "GET", path: "/v1/actions?id={action}", status: 200},
	{name: "actions without an id", method: "GET", path: "/v1/actions", status: 422, code: "invalid_input"},
	{name: "get an action", method: "GET", path: "/v1/actions/{action}", status: 200},
	{name: "unknown action", method: "GET", path: "/v1/actions/999", status: 404, code: "not_found"},

	// A running action locks the load balancer (the world delays detach).
	{name: "detach from the network", method: "POST", path: "/v1/load_balancers/{lb}/actions/detach_from_network", body: `{"network":{network}}`, status: 201},
	{name: "a mutation while the detach runs", method: "POST", path: "/v1/load_balancers/{lb}/actions/delete_service", body: `{"listen_port":80}`, status: 423, code: "locked"},
	{name: "let the detach end", method: "POST", path: "/_emu/clock/advance", body: `{"duration":"1m"}`, status: 200},
	{name: "detach again", method: "POST", path: "/v1/load_balancers/{lb}/actions/detach_from_network", body: `{"network":{network}}`, status: 422, code: "load_balancer_not_attached_to_network"},
	{name: "delete the http service", method: "POST", path: "/v1/load_balancers/{lb}/actions/delete_service", body: `{"listen_port":80}`, status: 201},
	{name: "delete the https service", method: "POST", path: "/v1/load_balancers/{lb}/actions/delete_service", body: `{"listen_port":8443}`, status: 201},
	{name: "delete a missing service", method: "POST", path: "/v1/load_balancers/{lb}/actions/delete_service", body: `{"listen_port":80}`, status: 404, code: "not_found"},

	// Deletes.
	{name: "delete the load balancer", method: "DELETE", path: "/v1/load_balancers/{lb}", status: 201},
	{name: "delete an unknown load balancer", method: "DELETE", path: "/v1/load_balancers/999", status: 404, code: "not_found"},
	{name: "delete the certificate", method: "DELETE", path: "/v1/certificates/{cert}", status: 204},
	{name: "delete an unknown certificate", method: "DELETE", path: "/v1/certificates/999", status: 404, code: "not_found"},
	{name: "delete the network", method: "DELETE", path: "/v1/networks/{network}", status: 204},
	{name: "delete an unknown network", method: "DELETE", path: "/v1/networks/999", status: 404, code: "not_found"},
}

// TestOpenAPI_EveryEndpointAgainstTheDescription runs the scenario through
// the contract transport, then checks that every route of the emulator is an
// operation of the description and answered at least once.
func TestOpenAPI_EveryEndpointAgainstTheDescription(t *testing.T) {
	c := newContract(t)
	clock := hcloudemu.NewFakeClock(epoch)
	w := newWorld(t, hcloudemu.WithClock(clock), hcloudemu.WithCommandDelay("detach_from_network", time.Minute))
	client := &http.Client{Transport: c, Timeout: 5 * time.Second}
	vars := map[string]string{"network": strconv.FormatInt(w.network, 10)}
	for i, id := range w.servers {
		vars["server"+strconv.Itoa(i+1)] = strconv.FormatInt(id, 10)
	}
	for _, s := range scenario {
		s.run(t, client, w.endpoint, w.emu.Token(), vars)
	}

	var responses, refusals int
	for _, r := range hcloudemu.RouteTable() {
		method, path, _ := strings.Cut(r, " ")
		op := method + " " + strings.TrimPrefix(path, "/v1")
		if _, err := operation(c.d.doc, method, strings.TrimPrefix(path, "/v1")); err != nil {
			t.Errorf("route %s: %v", r, err)
			continue
		}
		tl := c.tallyOf(op)
		switch removed := removedOperation(op); {
		case removed && (tl.responses > 0 || tl.refusals == 0):
			t.Errorf("route %s: removed from today's API, want only refusals, got %+v", r, tl)
		case !removed && tl.responses == 0:
			t.Errorf("route %s: the scenario has no successful request", r)
		}
		responses += tl.responses
		refusals += tl.refusals
	}
	t.Logf("%d routes, each an operation of the description; %d responses and %d refusals validated",
		len(hcloudemu.RouteTable()), responses, refusals)
}

// TestOpenAPI_DeparturesAreDocumented keeps docs/emulator.md listing every
// deliberate departure from the description with its date.
func TestOpenAPI_DeparturesAreDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/emulator.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, d := range departures {
		if !strings.Contains(doc, d.key) || !strings.Contains(doc, d.date) {
			t.Errorf("docs/emulator.md does not list %q with its date %s", d.key, d.date)
		}
	}
	if !slices.IsSortedFunc(departures, func(a, b departure) int { return strings.Compare(a.date, b.date) }) {
		t.Error("departures are not in date order")
	}
}

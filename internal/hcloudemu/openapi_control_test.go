package hcloudemu_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestOpenAPI_CheckRefusesWhatTheDescriptionForbids feeds the contract's
// check replies that break the description in the ways the emulator used
// to (and a few more), so a check that lets everything through fails here.
func TestOpenAPI_CheckRefusesWhatTheDescriptionForbids(t *testing.T) {
	w := newWorld(t)
	lb := createLB(t, w, "web")
	a, resp, err := w.client.LoadBalancer.AddService(ctx(t), lb, hcloudAddTCPService(80))
	mustWait(t, w.client, a, resp, err)
	lbPath := "/v1/load_balancers/" + jsonNumber(lb.ID)
	lbBody := rawGet(t, w, lbPath)

	tests := []struct {
		name         string
		method, path string
		status       int
		body         string
		wantErr      string // "" = the reply matches
	}{
		{"the emulator's load balancer matches", "GET", lbPath, 200, lbBody, ""},
		// A tcp service may carry any extra field (its schema does not close
		// additionalProperties), so "http": null is only caught on http ones;
		// TestLoadBalancerWire_SubObjectsThatDoNotApplyAreAbsent covers tcp.
		{"null http of an http service", "GET", lbPath, 200, edit(t, lbBody, func(lb map[string]any) {
			service(lb)["protocol"] = "http"
			service(lb)["http"] = nil
		}), "not nullable"},
		{"null http of a tcp health check", "GET", lbPath, 200, edit(t, lbBody, func(lb map[string]any) {
			service(lb)["health_check"].(map[string]any)["http"] = nil
		}), "not nullable"},
		{"a service without its required health check", "GET", lbPath, 200, edit(t, lbBody, func(lb map[string]any) {
			delete(service(lb), "health_check")
		}), "health_check"},
		{"an algorithm outside the enum", "GET", lbPath, 200, edit(t, lbBody, func(lb map[string]any) {
			lb["algorithm"] = map[string]any{"type": "random"}
		}), "allowed values"},
		{"a name of the wrong type", "GET", lbPath, 200, edit(t, lbBody, func(lb map[string]any) { lb["name"] = 5 }), "string"},
		{"a body on a 204", "DELETE", "/v1/networks/1", 204, `{}`, "has a body"},
		{"an undeclared status", "GET", "/v1/locations", 201, `{"locations":[]}`, "status"},
		{"an error without a code", "GET", "/v1/locations/999", 404, `{"error":{"message":"x","details":{}}}`, "code"},
		{"a list without meta", "GET", "/v1/locations", 200, `{"locations":[]}`, "meta"},
	}
	c := newContract(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, "http://127.0.0.1"+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp := &http.Response{StatusCode: tc.status, Header: http.Header{"Content-Type": {"application/json"}}}
			_, errs := c.check(req, nil, resp, []byte(tc.body))
			joined := ""
			for _, e := range errs {
				joined += e.Error() + "\n"
			}
			switch {
			case tc.wantErr == "" && len(errs) > 0:
				t.Errorf("check() = %s, want no error", joined)
			case tc.wantErr != "" && !strings.Contains(joined, tc.wantErr):
				t.Errorf("check() = %q, want an error mentioning %q", joined, tc.wantErr)
			}
		})
	}
}

// edit applies f to the load_balancer object of body.
func edit(t *testing.T, body string, f func(lb map[string]any)) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	f(doc["load_balancer"].(map[string]any))
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// service is the first service of a decoded load balancer.
func service(lb map[string]any) map[string]any {
	return lb["services"].([]any)[0].(map[string]any)
}

package apireq_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/apireq"
)

func TestPost(t *testing.T) {
	tests := []struct {
		name, pattern string
		id            int64
		wantPath      string
	}{
		{"an action of a load balancer", "/load_balancers/%d/actions/add_target", 42, "/load_balancers/42/actions/add_target"},
		{"a path without an ID", "/certificates", 42, "/certificates"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := apireq.Post(tt.pattern, tt.id, nil)
			if r.Method != "POST" || r.Path != tt.wantPath || !r.Wait {
				t.Errorf("Post = %+v, want POST %s, awaited", r, tt.wantPath)
			}
		})
	}
}

func TestOf(t *testing.T) {
	tests := []struct {
		name, method, path string
		wantOp             string // "" when no endpoint matches
		wantID             int64
	}{
		{"the create", "POST", "/load_balancers", "create", 0},
		{"an update", "PUT", "/load_balancers/42", "update", 42},
		{"a delete", "DELETE", "/load_balancers/42", "delete", 42},
		{"an action", "POST", "/load_balancers/7/actions/add_target", "add_target", 7},
		{"a certificate", "POST", "/certificates", "create_managed_certificate", 0},
		{"a route", "POST", "/networks/5/actions/delete_route", "delete_route", 5},
		{"a method the path does not take", "GET", "/load_balancers/42", "", 0},
		{"a delete of an action", "DELETE", "/load_balancers/42/actions/add_target", "", 0},
		{"an action the CCM does not send", "POST", "/networks/42/actions/change_protection", "", 0},
		{"another resource", "DELETE", "/servers/42", "", 0},
		{"a path below an ID", "DELETE", "/load_balancers/42/x", "", 0},
		{"an ID that is not a number", "DELETE", "/load_balancers/x", "", 0},
		{"a signed ID", "DELETE", "/load_balancers/+42", "", 0},
		{"an ID with a leading zero", "DELETE", "/load_balancers/042", "", 0},
		{"a zero ID", "DELETE", "/load_balancers/0", "", 0},
		{"a query", "POST", "/load_balancers?x=1", "", 0},
		{"a second path segment", "POST", "/load_balancers/7/../8/actions/add_target", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, id, ok := apireq.Of(tt.method, tt.path)
			if ok != (tt.wantOp != "") || e.Operation != tt.wantOp || id != tt.wantID {
				t.Errorf("Of(%s %s) = %+v, %d, %v; want operation %q, ID %d", tt.method, tt.path, e, id, ok, tt.wantOp, tt.wantID)
			}
			if ok && apireq.Fill(e.Pattern, id) != tt.path {
				t.Errorf("Fill(%s, %d) = %s, want %s", e.Pattern, id, apireq.Fill(e.Pattern, id), tt.path)
			}
		})
	}
}

// TestEndpoints_areOneEach: the table names each method and pattern once, and each operation
// once, so a request has one endpoint and an endpoint one operation.
func TestEndpoints_areOneEach(t *testing.T) {
	seen, ops := map[string]bool{}, map[string]bool{}
	for _, e := range apireq.Endpoints() {
		if k := e.Method + " " + e.Pattern; seen[k] {
			t.Errorf("%s is in the table twice", k)
		} else {
			seen[k] = true
		}
		if ops[e.Operation] {
			t.Errorf("operation %s is in the table twice", e.Operation)
		}
		ops[e.Operation] = true
	}
}

func TestOn(t *testing.T) {
	r := apireq.Request{Outcomes: []apireq.Outcome{
		{Code: hcloud.ErrorCodeNotFound, Then: apireq.Done},
		{Code: hcloud.ErrorCodeResourceLimitExceeded, Then: apireq.Skipped},
	}}
	apiErr := func(code hcloud.ErrorCode) error {
		return fmt.Errorf("wrapped: %w", hcloud.Error{Code: code, Message: "x"})
	}
	tests := []struct {
		name   string
		err    error
		want   apireq.Result
		wantOK bool
	}{
		{"no error", nil, apireq.Fail, false},
		{"a declared code", apiErr(hcloud.ErrorCodeNotFound), apireq.Done, true},
		{"another declared code, wrapped", apiErr(hcloud.ErrorCodeResourceLimitExceeded), apireq.Skipped, true},
		{"an undeclared code", apiErr(hcloud.ErrorCodeLocked), apireq.Fail, false},
		{"not an API error", errors.New("connection refused"), apireq.Fail, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, ok := r.On(tt.err)
			if ok != tt.wantOK || o.Then != tt.want {
				t.Errorf("On(%v) = %v, %v; want %v, %v", tt.err, o.Then, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestJSON(t *testing.T) {
	tests := []struct {
		name string
		body any
		want string
	}{
		{"no body", nil, ""},
		{"a schema body, omitempty kept", schema.LoadBalancerActionAttachToNetworkRequest{Network: 5}, `{"network":5}`},
		{"a null pointer that is not omitted", schema.LoadBalancerActionChangeDNSPtrRequest{IP: "1.2.3.4"}, `{"ip":"1.2.3.4","dns_ptr":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := apireq.Request{Method: "POST", Path: "/x", Body: tt.body}.JSON()
			if err != nil || string(b) != tt.want {
				t.Errorf("JSON = %s, %v; want %s", b, err, tt.want)
			}
		})
	}
	if _, err := (apireq.Request{Method: "POST", Path: "/x", Body: func() {}}).JSON(); err == nil {
		t.Error("JSON of a body encoding/json cannot encode: no error")
	}
}

func TestResultText(t *testing.T) {
	for r, want := range map[apireq.Result]string{apireq.Fail: "fail", apireq.Done: "done", apireq.Skipped: "skipped", apireq.Split: "split", 9: "Result(9)"} {
		if b, _ := r.MarshalText(); string(b) != want {
			t.Errorf("%d: %s, want %s", int(r), b, want)
		}
	}
}

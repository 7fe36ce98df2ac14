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
		name, opPath string
		id           int64
		wantPath     string
	}{
		{"an action of a load balancer", "/load_balancers/%d/actions/add_target", 42, "/load_balancers/42/actions/add_target"},
		{"a path without an ID", "/certificates", 42, "/certificates"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := apireq.Post(tt.opPath, tt.id, nil)
			if r.Method != "POST" || r.Path != tt.wantPath || r.OpPath != tt.opPath || !r.Wait {
				t.Errorf("Post = %+v, want POST %s (op path %s), awaited", r, tt.wantPath, tt.opPath)
			}
		})
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

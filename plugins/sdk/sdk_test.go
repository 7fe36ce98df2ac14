package sdk_test

import (
	"errors"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk"
)

func TestServe(t *testing.T) {
	wrap := func(n string) any { return sdk.LoadBalancerNameReply{Name: n} }
	tests := []struct {
		name string
		req  string
		f    func(sdk.LoadBalancerNameInput) (string, error)
		want string
	}{
		{
			name: "The handler's result is wrapped in a reply",
			req:  `{"service":{"name":"web"}}`,
			f:    func(in sdk.LoadBalancerNameInput) (string, error) { return "lb-" + in.Service.Name, nil },
			want: `{"name":"lb-web"}`,
		},
		{
			name: "The handler's error becomes an error reply",
			req:  `{}`,
			f:    func(sdk.LoadBalancerNameInput) (string, error) { return "", errors.New("no") },
			want: `{"error":"no"}`,
		},
		{
			name: "An error without a message still says something",
			req:  `{}`,
			f:    func(sdk.LoadBalancerNameInput) (string, error) { return "", errors.New("") },
			want: `{"error":"error without message"}`,
		},
		{
			name: "A panic becomes an error reply",
			req:  `{}`,
			f:    func(sdk.LoadBalancerNameInput) (string, error) { panic("boom") },
			want: `{"error":"plugin panicked: boom"}`,
		},
		{
			name: "An undecodable request becomes an error reply",
			req:  `{"service":`,
			f:    func(sdk.LoadBalancerNameInput) (string, error) { return "x", nil },
			want: `{"error":"decode request: unexpected end of JSON input"}`,
		},
		{
			name: "A missing handler is reported",
			req:  `{}`,
			want: `{"error":"no handler registered (call Handle from init)"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(sdk.Serve([]byte(tc.req), tc.f, wrap)); got != tc.want {
				t.Errorf("reply %s, want %s", got, tc.want)
			}
		})
	}
}

// TestServe_nodeInputDatacenter: the node_labels request carries the server's datacenter (the
// node's zone) next to its location; an older host without the field gives "".
func TestServe_nodeInputDatacenter(t *testing.T) {
	wrap := func(n string) any { return sdk.LoadBalancerNameReply{Name: n} }
	f := func(in sdk.NodeInput) (string, error) { return in.Server.Location + "/" + in.Server.Datacenter, nil }
	tests := []struct{ name, req, want string }{
		{"The datacenter is decoded", `{"server":{"location":"fsn1","datacenter":"fsn1-dc14"}}`, `{"name":"fsn1/fsn1-dc14"}`},
		{"A request without it leaves it empty", `{"server":{"location":"fsn1"}}`, `{"name":"fsn1/"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(sdk.Serve([]byte(tc.req), f, wrap)); got != tc.want {
				t.Errorf("reply %s, want %s", got, tc.want)
			}
		})
	}
}

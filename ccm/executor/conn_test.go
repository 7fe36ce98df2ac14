package executor_test

import (
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// testConn returns a connection to the emulator at endpoint; clientOpts (the tests' short
// constant backoffs) win over the ones derived from the config.
func testConn(t *testing.T, endpoint, token string, clientOpts ...hcloud.ClientOption) *hcloudclient.Conn {
	t.Helper()
	cfg := config.HCloud{Endpoint: endpoint, Token: token, PollInterval: time.Millisecond, RetryInterval: time.Millisecond, Timeout: 30 * time.Second}
	conn, err := hcloudclient.New(hcloudclient.Options{Config: cfg, ClientOptions: clientOpts})
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// newExecutor returns executor.New(o) and fails the test on an error.
func newExecutor(t *testing.T, o executor.Options) *executor.Executor {
	t.Helper()
	x, err := executor.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// withNamespaces sets Options.Namespaces for newEnv.
func withNamespaces(l corelisters.NamespaceLister) func(*executor.Options) {
	return func(o *executor.Options) { o.Namespaces = l }
}

// withActionPoll sets Options.ActionPollInterval for newEnv.
func withActionPoll(d time.Duration) func(*executor.Options) {
	return func(o *executor.Options) { o.ActionPollInterval = d }
}

// TestNew_errors: a missing connection or decider is an error naming the field; allowing
// every mutation is spelled out (policy.AllowAll), never a default.
func TestNew_errors(t *testing.T) {
	tests := []struct {
		name    string
		o       executor.Options
		wantErr string
	}{
		{"no connection", executor.Options{Decider: policy.AllowAll{}}, "executor.New: Options.Conn is required: pass the connection of hcloudclient.New"},
		// Issue 30: an executor with no decider allowed every mutation, and any package could build one.
		{"no decider", executor.Options{Conn: testConn(t, "http://127.0.0.1:1/v1", "t")},
			"executor.New: Options.Decider is required: pass the policy engine, or policy.AllowAll{} to allow every mutation"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := executor.New(tc.o); err == nil || err.Error() != tc.wantErr {
				t.Errorf("New() error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

package ccm

import (
	"net"
	"net/http"
	"testing"
)

// TestServeMetrics: an address that cannot be served is logged and skipped, never an error
// (the official CCM runs on without its metrics server); a free address serves /metrics.
func TestServeMetrics(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Close() })

	tests := []struct {
		name      string
		addr      string
		wantServe bool
	}{
		{name: "empty address: not served (the official would listen on :80)", addr: ""},
		{name: "address in use", addr: busy.Addr().String()},
		{name: "malformed address", addr: "not-an-address"},
		{name: "free address", addr: "127.0.0.1:0", wantServe: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := serveMetrics(tc.addr)
			if (got != nil) != tc.wantServe {
				t.Fatalf("serveMetrics(%q) = %v, want serving %v", tc.addr, got, tc.wantServe)
			}
			if got == nil {
				return
			}
			resp, err := http.Get("http://" + got.String() + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("GET /metrics = %d, want 200", resp.StatusCode)
			}
		})
	}
}

package hcloudclient

import (
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// TestConn_oneTransport: the readers of a Conn and a client built from its ClientOptions (the
// executor's writing client) send through the one pacing Transport, so they share one budget.
func TestConn_oneTransport(t *testing.T) {
	tests := []struct {
		name string
		send func(t *testing.T, c *Conn) error
	}{
		{"a reader", func(t *testing.T, c *Conn) error { _, err := c.Servers().All(t.Context()); return err }},
		{"a client built from ClientOptions", func(t *testing.T, c *Conn) error {
			_, err := hcloud.NewClient(c.ClientOptions()...).Location.All(t.Context())
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			emu, endpoint := hcloudemu.NewTestServer(t, hcloudemu.WithRateLimit(3600))
			c, err := New(Options{Config: config.HCloud{Endpoint: endpoint, Token: emu.Token(), PollInterval: time.Millisecond, RetryInterval: time.Millisecond, Timeout: 5 * time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.send(t, c); err != nil {
				t.Fatal(err)
			}
			c.transport.mu.Lock()
			defer c.transport.mu.Unlock()
			if !c.transport.known || c.transport.limit != 3600 {
				t.Errorf("the Conn's transport saw no rate limit headers (known %v, limit %d): the request went around it", c.transport.known, c.transport.limit)
			}
		})
	}
}

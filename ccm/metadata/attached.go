// Package metadata runs the official CCM's start-up check that the server the CCM runs on is
// attached to HCLOUD_NETWORK, by asking the Hetzner metadata service for the server's private
// networks. A control plane outside the network would hand out node addresses and routes it
// cannot reach; the check stops that misconfiguration at start.
package metadata

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	hcmeta "github.com/hetznercloud/hcloud-go/v2/hcloud/metadata"
	"sigs.k8s.io/yaml"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
)

// DefaultEndpoint is the Hetzner metadata service, reachable from every Hetzner Cloud server.
const DefaultEndpoint = hcmeta.Endpoint

// DefaultTimeout bounds each metadata request; it is hcloud-go's metadata client default, which
// the official CCM uses.
const DefaultTimeout = 5 * time.Second

// Option changes how CheckAttached asks.
type Option func(*options)

type options struct{ timeout time.Duration }

// WithTimeout bounds each metadata request by d instead of DefaultTimeout.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// CheckAttached returns nil when network is nil (HCLOUD_NETWORK unset) or
// cfg.DisableAttachedCheck is set, without any request. Otherwise it asks the metadata service
// (cfg.MetadataEndpoint, or DefaultEndpoint) for the private networks of the server it runs on
// and returns nil when network is one of them.
//
// # Errors
//
// Every error names HCLOUD_NETWORK and HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK: the server is not
// attached (the message names the server's ID when the metadata service tells it, and the
// networks it is in); the metadata service did not answer within the timeout, answered an
// HTTP error or an unreadable list (the message names the endpoint); HCLOUD_METADATA_ENDPOINT
// is not an http or https URL.
func CheckAttached(ctx context.Context, cfg config.Network, network *hcloud.Network, opts ...Option) error {
	if network == nil || cfg.DisableAttachedCheck {
		return nil
	}
	o := options{timeout: DefaultTimeout}
	for _, f := range opts {
		f(&o)
	}
	endpoint := cfg.MetadataEndpoint
	if endpoint == "" {
		endpoint = DefaultEndpoint
	} else if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("attached-network check: invalid value for %q: %q (expect an http or https URL such as %s)",
			config.EnvHCloudMetadataEndpoint, endpoint, DefaultEndpoint)
	}
	client := hcmeta.NewClient(hcmeta.WithEndpoint(endpoint), hcmeta.WithTimeout(o.timeout))

	ids, err := privateNetworkIDs(ctx, client, o.timeout)
	if err != nil {
		return fmt.Errorf("attached-network check: ask the metadata service at %s for this server's private networks: %w; "+
			"if the CCM does not run on a Hetzner Cloud server, set %s=true (or point %s at a reachable metadata service)",
			endpoint, err, config.EnvHCloudNetworkDisableAttachedCheck, config.EnvHCloudMetadataEndpoint)
	}
	if slices.Contains(ids, network.ID) {
		return nil
	}
	server := "this server"
	idCtx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if id, err := client.InstanceIDWithContext(idCtx); err == nil {
		server = fmt.Sprintf("this server (ID %d)", id)
	}
	return fmt.Errorf("attached-network check: %s is not attached to network %q (ID %d) named by %s; the metadata service at %s "+
		"lists networks %v: attach the server to the network, or set %s=true if the CCM deliberately runs outside it",
		server, network.Name, network.ID, config.EnvHCloudNetwork, endpoint, ids, config.EnvHCloudNetworkDisableAttachedCheck)
}

// privateNetworkIDs reads the network IDs from the metadata service's private-networks list
// (YAML: a list of {ip, alias_ips, interface_num, mac_address, network_id, network_name,
// network, subnet, gateway}).
func privateNetworkIDs(ctx context.Context, client *hcmeta.Client, timeout time.Duration) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	raw, err := client.PrivateNetworksWithContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("get private-networks (timeout %s): %w", timeout, err)
	}
	var nets []struct {
		NetworkID int64 `json:"network_id"`
	}
	if err := yaml.Unmarshal([]byte(raw), &nets); err != nil {
		return nil, fmt.Errorf("private-networks is not a YAML list: %w", err)
	}
	ids := make([]int64, 0, len(nets))
	for _, n := range nets {
		ids = append(ids, n.NetworkID)
	}
	return ids, nil
}

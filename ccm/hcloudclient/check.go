package hcloudclient

import (
	"context"
	"fmt"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
)

// Check proves the token and the endpoint with one cheap request (GET /locations, as the
// official CCM does at startup).
//
// # Errors
//
// Any API or transport error; an invalid token is reported with the variable to fix.
func Check(ctx context.Context, client *hcloud.Client) error {
	const op = "hcloudclient.Check"
	if _, err := client.Location.All(ctx); err != nil {
		if hcloud.IsError(err, hcloud.ErrorCodeUnauthorized) {
			return fmt.Errorf("%s: the API rejected the token: check %s: %w", op, config.EnvHCloudToken, err)
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// Network returns the network named by nameOrID (HCLOUD_NETWORK): an ID if it is a number
// and a network with that ID exists, a name otherwise.
//
// # Errors
//
// An API error, or no such network.
func Network(ctx context.Context, client *hcloud.Client, nameOrID string) (*hcloud.Network, error) {
	const op = "hcloudclient.Network"
	n, _, err := client.Network.Get(ctx, nameOrID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if n == nil {
		return nil, fmt.Errorf("%s: network %q not found: check %s", op, nameOrID, config.EnvHCloudNetwork)
	}
	return n, nil
}

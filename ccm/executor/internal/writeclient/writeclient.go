// Package writeclient builds the one hcloud-go client of the CCM that can write to Hetzner
// Cloud. It is internal to ccm/executor: the compiler refuses to build any package outside
// ccm/executor that imports it, and TestOnlyTheExecutorCanWriteToHetzner fails for any
// importer but ccm/executor (a package below ccm/executor would compile). Every other package
// reads through the wrappers of ccm/hcloudclient, which have no write method.
package writeclient

import (
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
)

// New returns a client with the settings of conn (token, endpoint, User-Agent, timeouts,
// action polling, retries, metrics) that sends through conn's one pacing transport, so its
// writes and conn's reads share the API budget (TestNew_sharesTheConn).
func New(conn *hcloudclient.Conn) *hcloud.Client {
	return hcloud.NewClient(conn.ClientOptions()...)
}

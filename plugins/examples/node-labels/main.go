// Command node-labels is an example node_labels plugin.
//
// Rules:
//   - every Hetzner server label whose key starts with "node.hcloud.example/" is copied onto the
//     node unchanged (label the server `node.hcloud.example/pool=db` and the node gets
//     `node.hcloud.example/pool=db`); other server labels are ignored;
//   - "node.hcloud.example/server-family" is the server type's leading letters (cx22 → cx,
//     cax11 → cax, ccx13 → ccx, cpx31 → cpx);
//   - "node.hcloud.example/cpu-arch" is arm64 for the cax family and amd64 otherwise.
//
// Build it with:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags="-s -w" -o node-labels.wasm .
package main

import (
	"strings"

	"github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk/nodelabels"
)

// Prefix is the label namespace this plugin copies and writes.
const Prefix = "node.hcloud.example/"

func init() { nodelabels.Handle(Labels) }

// Labels computes the node labels for in.
func Labels(in sdk.NodeInput) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range in.Server.Labels {
		if strings.HasPrefix(k, Prefix) {
			out[k] = v
		}
	}
	family := strings.TrimRightFunc(in.Server.Type, func(r rune) bool { return r >= '0' && r <= '9' })
	if family != "" {
		out[Prefix+"server-family"] = family
		arch := "amd64"
		if family == "cax" {
			arch = "arm64"
		}
		out[Prefix+"cpu-arch"] = arch
	}
	return out, nil
}

func main() {}

// Command labels-and-name is an example plugin serving both hooks from one module: one Go
// module is about the size of one hook's (the Go runtime is most of it), so both hooks fit one
// ConfigMap only this way (docs/plugins.md, "Deploying").
//
// node_labels, from the facts in the request (no table of Hetzner server types):
//   - "example.com/size": "small" for a cloud server of at most 4 cores, "large" above,
//     "dedicated" for a Robot server; none when the host sends neither (a host before
//     server_type);
//   - "example.com/arch": the server type's architecture, "x86" or "arm";
//   - "example.com/location": the server's location.
//
// load_balancer_name: "<namespace>-<service>-<first 8 characters of the UID>", lowercased,
// each run of characters outside a-z and 0-9 made one '-', at most 63 characters.
//
// Build it with:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags="-s -w" -o labels-and-name.wasm .
package main

import (
	"errors"
	"strings"

	"github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk/lbname"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk/nodelabels"
)

// Label keys this plugin writes.
const (
	LabelSize     = "example.com/size"
	LabelArch     = "example.com/arch"
	LabelLocation = "example.com/location"
)

// SmallCores is the most cores of a "small" server.
const SmallCores = 4

func init() {
	nodelabels.Handle(Labels)
	lbname.Handle(Name)
}

// Labels computes the node labels for in.
func Labels(in sdk.NodeInput) (map[string]string, error) {
	out := map[string]string{}
	switch s := in.Server; {
	case s.Robot != nil:
		out[LabelSize] = "dedicated"
	case s.ServerType != nil:
		out[LabelSize] = "small"
		if s.ServerType.Cores > SmallCores {
			out[LabelSize] = "large"
		}
		out[LabelArch] = s.ServerType.Architecture
	}
	if in.Server.Location != "" {
		out[LabelLocation] = in.Server.Location
	}
	return out, nil
}

// Name computes the load balancer name for in.
func Name(in sdk.LoadBalancerNameInput) (string, error) {
	uid := in.Service.UID
	if len(uid) < 8 {
		return "", errors.New("service uid shorter than 8 characters")
	}
	name := sanitize(in.Service.Namespace + "-" + in.Service.Name)
	if len(name) > 63-9 {
		name = strings.TrimRight(name[:63-9], "-")
	}
	return name + "-" + sanitize(uid[:8]), nil
}

// sanitize lowercases s, turns each run of other characters into one '-' and trims '-'.
func sanitize(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(b.String(), "-")
}

func main() {}

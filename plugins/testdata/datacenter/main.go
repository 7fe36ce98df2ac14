// Command datacenter is a test plugin: it labels a node with the datacenter and location of its
// server as the host sends them, so that a test sees the node_labels input through the wazero
// host and the SDK. TestPlugin_nodeInputDatacenter builds it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags="-s -w" ./testdata/datacenter
package main

import (
	"github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk/nodelabels"
)

func init() {
	nodelabels.Handle(func(in sdk.NodeInput) (map[string]string, error) {
		return map[string]string{"example.com/datacenter": in.Server.Datacenter, "example.com/location": in.Server.Location}, nil
	})
}

func main() {}

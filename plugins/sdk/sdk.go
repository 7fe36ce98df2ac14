// Package sdk is the guest side of the plugin ABI v1 for plugins written in Go.
//
// A plugin is a Go main package built as a WebAssembly reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags="-s -w" -o labels.wasm .
//
// It imports the package of each hook it implements and registers one function from init:
//
//	package main
//
//	import (
//		"github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk"
//		"github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk/nodelabels"
//	)
//
//	func init() {
//		nodelabels.Handle(func(in sdk.NodeInput) (map[string]string, error) {
//			return map[string]string{"example.com/type": in.Server.Type}, nil
//		})
//	}
//
//	func main() {}
//
// Importing this package exports ccm_abi_version, ccm_alloc and ccm_free; importing
// sdk/nodelabels exports ccm_node_labels and importing sdk/lbname exports ccm_lb_name, so a
// module exports exactly the hooks it implements.
//
// # Notes
//
//   - Register from init: with -buildmode=c-shared the host runs _initialize, which runs package
//     init functions but not main.
//   - The types here mirror the host's (package plugins, hooks.go) field for field; the host
//     tests that their JSON encodings stay identical. The package does not import the host, so a
//     plugin does not link wazero.
//   - The files with //go:wasmexport build only for wasip1; on other platforms the package is
//     plain Go, so plugin code can be unit-tested with `go test` on the host.
package sdk

import (
	"encoding/json"
	"errors"
)

// ABIVersion is the plugin ABI version this SDK implements (returned by ccm_abi_version).
const ABIVersion = 1

// NodeInput is the request of the node_labels hook.
type NodeInput struct {
	NodeName   string            `json:"node_name"`
	NodeLabels map[string]string `json:"node_labels"`
	Server     Server            `json:"server"`
}

// Server is the Hetzner server behind a node: a cloud server (ServerType set) or, with Robot
// enabled in the CCM, a dedicated server (Robot set).
type Server struct {
	ID          int64  `json:"id"`
	Name        string `json:"name"`
	Type        string `json:"type"`
	Location    string `json:"location"`
	NetworkZone string `json:"network_zone"`
	// Datacenter is the datacenter name of the location, the value the CCM sets as the node's
	// zone (topology.kubernetes.io/zone), e.g. "fsn1-dc14"; the location name for locations
	// without a datacenter name. Added in ABI v1 without a version change (additive): hosts
	// before it leave it "".
	Datacenter  string            `json:"datacenter"`
	Labels      map[string]string `json:"labels"`
	PublicIPv4  string            `json:"public_ipv4,omitempty"`
	PublicIPv6  string            `json:"public_ipv6,omitempty"`
	PrivateNets []PrivateNet      `json:"private_networks"`
	// ServerType holds the hardware facts of the server's type (cores, memory, disk,
	// architecture, CPU type), so a plugin needs no table of Hetzner server types. Added in
	// ABI v1 without a version change (additive): hosts before it omit it (nil).
	ServerType *ServerType `json:"server_type,omitempty"`
	// Robot is set, instead of ServerType, when the node is a dedicated (Robot) server; ID is
	// then the Robot server number. Added in ABI v1 without a version change (additive).
	Robot *RobotServer `json:"robot,omitempty"`
}

// RobotServer is what the Robot API tells about a dedicated server.
type RobotServer struct {
	// Product is the Robot product name, e.g. "AX41-NVMe" or "Server Auction".
	Product string `json:"product"`
	// DataCenter is the Robot data center as Robot spells it, e.g. "FSN1-DC16".
	DataCenter string `json:"data_center"`
}

// ServerType is the hardware of a Hetzner Cloud server type, as the API reports it.
type ServerType struct {
	// Name is the type's name, e.g. "cax21" (the same as Server.Type).
	Name string `json:"name"`
	// Cores is the number of virtual CPU cores.
	Cores int `json:"cores"`
	// MemoryGB is the memory in GB (a float: some types have 0.5 GB steps).
	MemoryGB float64 `json:"memory_gb"`
	// DiskGB is the local disk in GB.
	DiskGB int `json:"disk_gb"`
	// Architecture is "x86" or "arm".
	Architecture string `json:"architecture"`
	// CPUType is "shared" or "dedicated".
	CPUType string `json:"cpu_type"`
}

// PrivateNet is a server's attachment to a private network.
type PrivateNet struct {
	NetworkID int64  `json:"network_id"`
	IP        string `json:"ip"`
}

// NodeLabelsReply is the reply of the node_labels hook.
type NodeLabelsReply struct {
	Labels map[string]string `json:"labels,omitempty"`
	Error  string            `json:"error,omitempty"`
}

// LoadBalancerNameInput is the request of the load_balancer_name hook.
type LoadBalancerNameInput struct {
	ClusterName string  `json:"cluster_name"`
	DefaultName string  `json:"default_name"`
	Service     Service `json:"service"`
}

// Service is the Kubernetes Service a load balancer is named for.
type Service struct {
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	UID         string            `json:"uid"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// LoadBalancerNameReply is the reply of the load_balancer_name hook.
type LoadBalancerNameReply struct {
	Name  string `json:"name,omitempty"`
	Error string `json:"error,omitempty"`
}

// ErrNotRegistered is the reason in the error reply of a hook whose package is imported but
// whose Handle was never called.
var ErrNotRegistered = errors.New("no handler registered (call Handle from init)")

// Serve decodes a request of type In, calls f and encodes its result with wrap, or an
// {"error": ...} reply when decoding fails, f is nil, f returns an error or f panics.
//
// Hook packages (sdk/nodelabels, sdk/lbname) use it; it is exported so they can, and so a
// plugin's tests can run the exact bytes-in, bytes-out path on the host.
func Serve[In, Out any](req []byte, f func(In) (Out, error), wrap func(Out) any) (reply []byte) {
	defer func() {
		if r := recover(); r != nil {
			reply = errorReply(errors.New("plugin panicked: " + panicString(r)))
		}
	}()
	if f == nil {
		return errorReply(ErrNotRegistered)
	}
	var in In
	if err := json.Unmarshal(req, &in); err != nil {
		return errorReply(errors.New("decode request: " + err.Error()))
	}
	out, err := f(in)
	if err != nil {
		return errorReply(err)
	}
	b, err := json.Marshal(wrap(out))
	if err != nil {
		return errorReply(errors.New("encode reply: " + err.Error()))
	}
	return b
}

func errorReply(err error) []byte {
	msg := err.Error()
	if msg == "" {
		msg = "error without message"
	}
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg}) // a struct of one string always encodes
	return b
}

func panicString(r any) string {
	switch v := r.(type) {
	case error:
		return v.Error()
	case string:
		return v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return "unprintable panic value"
		}
		return string(b)
	}
}

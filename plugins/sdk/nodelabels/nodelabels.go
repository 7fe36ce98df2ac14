// Package nodelabels implements the node_labels hook for Go plugins: importing it exports
// ccm_node_labels from the module, and Handle registers the function that answers it.
//
// Here's an example:
//
//	func init() {
//		nodelabels.Handle(func(in sdk.NodeInput) (map[string]string, error) {
//			return map[string]string{"example.com/location": in.Server.Location}, nil
//		})
//	}
//
// # Notes
//
//   - The host validates the labels (docs/plugins.md): keys under kubernetes.io or k8s.io,
//     invalid keys or values, or too many labels make the whole reply an error.
//   - A returned error becomes the reply {"error": "..."}; the CCM then keeps its built-in
//     behaviour and records a Warning event.
package nodelabels

import "github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk"

var handler func(sdk.NodeInput) (map[string]string, error)

// Handle registers f as the node_labels hook. Call it once, from init.
func Handle(f func(sdk.NodeInput) (map[string]string, error)) { handler = f }

// Serve answers one raw request with the registered handler, exactly as the export does.
// Plugin tests use it to check the JSON path on the host.
func Serve(req []byte) []byte {
	return sdk.Serve(req, handler, func(l map[string]string) any { return sdk.NodeLabelsReply{Labels: l} })
}

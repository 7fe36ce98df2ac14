//go:build wasip1

package nodelabels

import "github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk"

//go:wasmexport ccm_node_labels
func ccmNodeLabels(ptr, size uint32) uint64 { return sdk.Output(Serve(sdk.Input(ptr, size))) }

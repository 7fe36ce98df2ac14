//go:build wasip1

package lbname

import "github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk"

//go:wasmexport ccm_lb_name
func ccmLBName(ptr, size uint32) uint64 { return sdk.Output(Serve(sdk.Input(ptr, size))) }

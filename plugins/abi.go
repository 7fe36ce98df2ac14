package plugins

// The plugin ABI, version 1: every name and the result packing live in this file.
//
// A plugin is a reactor module. The host runs _initialize (if exported) once per instance and
// then calls, for each hook call:
//
//	in := ccm_alloc(len(request))        // (i32) -> i32
//	memory[in:in+len] = request JSON
//	packed := ccm_<hook>(in, len)         // (i32, i32) -> i64
//	ccm_free(in, len)                     // (i32, i32) -> ()
//	out, n := packed>>32, packed&0xffffffff
//	reply := copy of memory[out:out+n]
//	ccm_free(out, n)
//
// docs/plugins.md is the authoritative description for plugin authors.
const (
	// ABIVersion is the only value of ccm_abi_version the host accepts.
	ABIVersion = 1

	exportMemory     = "memory"
	exportInitialize = "_initialize"
	exportStart      = "_start" // a WASI command's entry point: never valid for a plugin
	exportABIVersion = "ccm_abi_version"
	exportAlloc      = "ccm_alloc"
	exportFree       = "ccm_free"

	importModuleWASI = "wasi_snapshot_preview1"
	importModuleEnv  = "env"
	importEnvAbort   = "abort" // AssemblyScript's abort(msg, file, line, column)
)

// hookExports maps each hook name to its export name.
var hookExports = map[string]string{
	HookNodeLabels:       "ccm_node_labels",
	HookLoadBalancerName: "ccm_lb_name",
}

// hookOrder is the order of Hooks() and of error messages.
var hookOrder = []string{HookNodeLabels, HookLoadBalancerName}

// unpack splits a hook result into the reply's pointer and length.
func unpack(packed uint64) (ptr, size uint32) {
	return uint32(packed >> 32), uint32(packed & 0xffff_ffff)
}

// pack is the inverse of unpack (used by tests and documented for guest authors).
func pack(ptr, size uint32) uint64 {
	return uint64(ptr)<<32 | uint64(size)
}

//go:build wasip1

package sdk

import "unsafe"

// pinned keeps buffers handed to the host reachable until the host frees them. Go's garbage
// collector does not move objects, so a pinned slice keeps its address.
var pinned = map[uint32][]byte{}

//go:wasmexport ccm_abi_version
func ccmABIVersion() uint32 { return ABIVersion }

//go:wasmexport ccm_alloc
func ccmAlloc(size uint32) uint32 { return alloc(size) }

//go:wasmexport ccm_free
func ccmFree(ptr, size uint32) { delete(pinned, ptr) }

func alloc(size uint32) uint32 {
	b := make([]byte, max(size, 1))
	p := uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) //nolint:gosec // the buffer's address in linear memory is what the host reads
	pinned[p] = b
	return p
}

// Input returns the request the host wrote at ptr, a buffer it got from ccm_alloc. It returns
// nil when ptr is not such a buffer or size exceeds it.
//
// For hook packages; plugin code never needs it.
func Input(ptr, size uint32) []byte {
	b, ok := pinned[ptr]
	if !ok || int(size) > len(b) {
		return nil
	}
	return b[:size]
}

// Output copies reply into a new pinned buffer and returns it packed as ptr<<32 | len, the
// result of a hook export.
//
// For hook packages; plugin code never needs it.
func Output(reply []byte) uint64 {
	p := alloc(uint32(len(reply))) //nolint:gosec // wasm32 linear memory is at most 4 GiB: len fits 32 bits
	copy(pinned[p], reply)
	return uint64(p)<<32 | uint64(len(reply))
}

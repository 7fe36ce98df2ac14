// Package hcloudemu is a stateful emulator of the Hetzner Cloud API, served
// over plain HTTP on loopback, for tests, the demo and the benchmarks.
//
// It speaks the wire format of hcloud-go (it encodes and decodes with
// hcloud-go's own hcloud/schema types), keeps locations, server types, load
// balancer types, servers, networks, load balancers, certificates and actions
// consistent with each other, and adds what a test needs around it: an
// injectable clock for asynchronous actions and locks, a token-bucket rate
// limit with the real headers, fault injection, a request log with counters,
// typed seeding from Go and admin endpoints under /_emu/ for out-of-process use.
//
// Start with NewTestServer in tests or New plus Handler elsewhere:
//
//	emu, endpoint := hcloudemu.NewTestServer(t)
//	client := hcloud.NewClient(hcloud.WithEndpoint(endpoint), hcloud.WithToken(emu.Token()))
//
// docs/emulator.md describes the behaviours and the choices made where the real
// API is undocumented.
package hcloudemu

module github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk

// go1.24: the lowest release with //go:wasmexport (exports_wasip1.go, */export_wasip1.go).
// The SDK imports only the standard library; `go vet` (its stdversion check) fails when code
// uses a standard library API newer than this line, and the compiler when a language feature is.
go 1.24

// Package policy is the CCM's policy gate: every Hetzner Cloud mutation is described as an
// [Input] and decided by Rego policies before it runs.
//
// Start with [NewEngine], feed it revisions with [WatchDir] or [WatchConfigMap] (or
// [Engine.Load] directly), and call [Engine.Decide] per mutation. [Engine] implements [Decider].
// The CLI helpers [EvalFile] and [RunTests] evaluate and test policies as the engine loads them:
// same layout, sandbox, type check against the input schema, and strict built-in errors.
//
// The policy contract (entrypoints data.ccm.deny and data.ccm.warn, message forms, data files,
// the sandbox) is documented in docs/policy.md; the input schema in
// docs/reference/policy-input.md is generated from input/input.go by `make generate` (go generate ./...).
package policy

//go:generate go run ./internal/gendoc

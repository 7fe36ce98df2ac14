package policy

import (
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
)

// removedBuiltins are the built-ins the sandbox takes away: those that reach the network or the
// host (http.send, net.lookup_ip_addr, opa.runtime) and those that make decisions
// non-reproducible (rand.intn, uuid.rfc4122).
var removedBuiltins = []string{"http.send", "net.lookup_ip_addr", "opa.runtime", "rand.intn", "uuid.rfc4122"}

// Capabilities returns the capabilities policies are compiled with: this OPA version's built-ins
// without [removedBuiltins], and no network host at all (AllowNet is empty, not nil).
//
// Write it as JSON (encoding/json) to run the opa CLI with the same sandbox:
// `opa test --capabilities caps.json`. Each call returns a new value the caller may change.
func Capabilities() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	c.Builtins = slices.DeleteFunc(c.Builtins, func(b *ast.Builtin) bool {
		return slices.Contains(removedBuiltins, b.Name)
	})
	c.AllowNet = []string{}
	return c
}

// gateFile is the file name of the CCM-owned wrapper module in errors.
const gateFile = "ccm_gate.rego"

// gateModule wraps the operators' rules so that the decision query is always defined, even when
// a policy defines only deny or only warn.
const gateModule = `package ccm_gate

default deny := set()

deny := data.ccm.deny

default warn := set()

warn := data.ccm.warn

decision := {"deny": deny, "warn": warn}
`

// gateQuery is the query evaluated per decision.
const gateQuery = "data.ccm_gate.decision"

// denyQuery evaluates deny alone; it runs only when gateQuery failed, to find out whether the
// failure was in a deny rule (the decision fails) or only in a warn rule (it does not block).
const denyQuery = "data.ccm_gate.deny"

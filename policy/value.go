package policy

import (
	"github.com/open-policy-agent/opa/v1/ast"
)

// inputValue converts in to the value Rego sees as input: the JSON encoding of in, so the field
// names are the json tags of input.go.
func inputValue(in Input) (ast.Value, error) {
	return ast.InterfaceToValue(in)
}

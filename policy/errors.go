package policy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Problem is one reason a policy revision was rejected.
type Problem struct {
	// File is the file name as given to Load (e.g. "lb.rego"); "" when the problem is not tied
	// to a file.
	File string
	// Row and Col locate the problem in File; 0 when unknown.
	Row, Col int
	// Code is OPA's error code (e.g. "rego_type_error", "rego_parse_error") or one of the CCM's:
	// "ccm_missing_package", "ccm_data_error", "ccm_options_error", "ccm_schema_error",
	// "ccm_type_error" (a literal object.get key on input that the input schema lacks),
	// "ccm_sample_error", "ccm_test_failed", "ccm_test_error", "ccm_test_data_undefined".
	Code string
	// Message says what is wrong and, where the CCM knows it, how to fix it.
	Message string
}

// String formats p as "file:row:col: code: message", leaving out what is unknown.
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Row > 0 {
			fmt.Fprintf(&b, ":%d", p.Row)
			if p.Col > 0 {
				fmt.Fprintf(&b, ":%d", p.Col)
			}
		}
		b.WriteString(": ")
	}
	if p.Code != "" {
		b.WriteString(p.Code)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// LoadError is returned by [Engine.Load] for a revision that was rejected. The revision that was
// in force before stays in force.
type LoadError struct {
	// Revision is the rejected revision.
	Revision string
	// Problems lists every problem found, in file order; never empty.
	Problems []Problem
}

func (e *LoadError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return fmt.Sprintf("policy revision %s rejected: %s", e.Revision, strings.Join(lines, "; "))
}

// sandboxHint is appended to errors about removed built-ins.
const sandboxHint = " (network, host and random built-ins are disabled in the CCM policy sandbox: " +
	"http.send, net.lookup_ip_addr, opa.runtime, rand.intn, uuid.rfc4122)"

// problemsFrom turns an OPA parse or compile error into problems.
func problemsFrom(err error) []Problem {
	var aerrs ast.Errors
	if !errors.As(err, &aerrs) {
		var aerr *ast.Error
		if !errors.As(err, &aerr) {
			return []Problem{{Code: "rego_error", Message: err.Error()}}
		}
		aerrs = ast.Errors{aerr}
	}
	ps := make([]Problem, 0, len(aerrs))
	for _, e := range aerrs {
		p := Problem{Code: e.Code, Message: explainRefError(e)}
		if e.Location != nil {
			p.File, p.Row, p.Col = e.Location.File, e.Location.Row, e.Location.Col
		}
		for _, b := range removedBuiltins {
			if strings.Contains(e.Message, "undefined function "+b) {
				p.Message += sandboxHint
				break
			}
		}
		ps = append(ps, p)
	}
	return ps
}

package policy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// TestEngine_Decide_messagesAreBounded: a policy's huge deny and warn messages (and codes) are
// cut on a character boundary before they reach the decision log, events and errors.
func TestEngine_Decide_messagesAreBounded(t *testing.T) {
	const huge = `package ccm

deny contains {"msg": concat("", ["é" | some i in numbers.range(1, 3000)]), "code": strings.repeat_code}

warn contains concat("", ["w" | some i in numbers.range(1, 5000)])
`
	src := strings.Replace(huge, "strings.repeat_code", `concat("", ["c" | some i in numbers.range(1, 1000)])`, 1)
	e := policy.NewEngine(policy.Options{})
	mustLoad(t, e, files("huge.rego", src))
	d := e.Decide(context.Background(), lbInput("lb11"))
	if d.Err != nil || len(d.Deny) != 1 || len(d.Warn) != 1 {
		t.Fatalf("Decide = %+v, want one deny and one warn", d)
	}
	for _, tc := range []struct {
		what string
		got  string
		max  int
	}{
		{"deny msg", d.Deny[0].Msg, 1024},
		{"deny code", d.Deny[0].Code, 256},
		{"warn msg", d.Warn[0].Msg, 1024},
	} {
		if len(tc.got) > tc.max || !strings.Contains(tc.got, "bytes cut)") {
			t.Errorf("%s: %d bytes (%q…), want at most %d ending in the cut note", tc.what, len(tc.got), tc.got[:min(40, len(tc.got))], tc.max)
		}
		if strings.ToValidUTF8(tc.got, "") != tc.got {
			t.Errorf("%s is cut inside a character", tc.what)
		}
	}
}

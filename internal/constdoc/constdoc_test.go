package constdoc_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/constdoc"
)

const src = `package x

// EnvToken is the API token.
// It is required.
//
// Type: string
// Default: unset
const EnvToken = "TOKEN"

const (
	// LBType specifies the type.
	//
	// Type: string
	// Default: lb11
	// Deprecated: use the env default.
	LBType = "type"

	notAString = 3
)
`

func TestParse(t *testing.T) {
	got, err := constdoc.Parse("x.go", []byte(src), []string{"Type", "Default", "Deprecated"}, []string{"Type", "Default"})
	if err != nil {
		t.Fatal(err)
	}
	want := []constdoc.Constant{
		{Ident: "EnvToken", Value: "TOKEN", Text: "The API token. It is required.",
			Trailers: map[string]string{"Type": "string", "Default": "unset"}},
		{Ident: "LBType", Value: "type", Text: "Specifies the type.",
			Trailers: map[string]string{"Type": "string", "Default": "lb11", "Deprecated": "use the env default."}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
	}
}

func TestParse_errors(t *testing.T) {
	tests := []struct {
		name, src string
		required  []string
		want      string
	}{
		{name: "a constant without a required trailer is named", src: "package x\n\n// A is a.\n//\n// Type: int\nconst A = \"a\"\n",
			required: []string{"Type", "Default"}, want: `constant A needs a "Default:" trailer line`},
		{name: "a file without string constants is an error", src: "package x\n\nconst A = 1\n", want: "no documented string constants"},
		{name: "a syntax error is reported", src: "package x\nconst (", want: "x.go:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := constdoc.Parse("x.go", []byte(tc.src), []string{"Type", "Default"}, tc.required)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse() error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestCell(t *testing.T) {
	if got := constdoc.Cell("a|b"); got != `a\|b` {
		t.Errorf("Cell() = %q", got)
	}
}

package inputdoc

import (
	"strings"
	"testing"
)

func TestGenerate_rejectsUndocumentedInput(t *testing.T) {
	const header = "package policy\n\nconst InputVersion = \"v1\"\n\nconst ActionX = \"x.create\"\n\n"
	tests := []struct {
		name string
		src  string
		ops  []string // nil: one operation
		want string
	}{
		{
			name: "A field without doc comment is an error",
			src:  header + "// Input is it.\ntype Input struct {\n\tA string `json:\"a\"`\n}\n",
			want: "Input.A: missing doc comment",
		},
		{
			name: "A field without json tag is an error",
			src:  header + "// Input is it.\ntype Input struct {\n\t// A is a.\n\tA string\n}\n",
			want: "every field needs a json tag",
		},
		{
			name: "An unsupported field type is an error",
			src:  header + "// Input is it.\ntype Input struct {\n\t// A is a.\n\tA complex128 `json:\"a\"`\n}\n",
			want: "unsupported field type",
		},
		{
			name: "A source without Input is an error",
			src:  header,
			want: "want InputVersion, Action* constants and type Input",
		},
		{
			name: "No operations is an error",
			src:  header + "// Input is it.\ntype Input struct {\n\t// A is a.\n\tA string `json:\"a\"`\n}\n",
			ops:  []string{},
			want: "no operations",
		},
		{
			// *B is written out in place as a nullable object (see jsonType); B is still defined.
			name: "Types not reachable from Input need no docs",
			src:  header + "// Input is it.\ntype Input struct {\n\t// A is a.\n\tA *B `json:\"a\"`\n}\n\n// B is b.\ntype B struct {\n\t// C is c.\n\tC []int `json:\"c,omitempty\"`\n}\n\ntype Other struct{ X int }\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ops := tc.ops
			if ops == nil {
				ops = []string{"create"}
			}
			md, schema, err := Generate([]byte(tc.src), ops)
			if tc.want == "" {
				if err != nil || !strings.Contains(string(md), "## B") || !strings.Contains(string(schema), `"B": {`) || !strings.Contains(string(schema), `"null"`) {
					t.Fatalf("Generate = %v\n%s\n%s", err, md, schema)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Generate() error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

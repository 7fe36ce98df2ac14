package policy

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/util"
)

// inputSchema returns the input schema as OPA's compiler takes it, built once from
// inputSchemaJSON (schema_gen.go): the bytes of docs/policy-input.schema.json, which `opa check
// --schema` reads. TestGeneratedCurrent regenerates both from input/input.go and fails while
// either differs, so the schema the CCM checks with and the documented one cannot differ. The
// CCM does not parse Go source at run time (docs/performance.md § The memory target, measured
// again).
var inputSchema = sync.OnceValues(func() (*ast.SchemaSet, error) {
	var doc any
	if err := util.UnmarshalJSON([]byte(inputSchemaJSON), &doc); err != nil {
		return nil, fmt.Errorf("build the policy input schema: %w", err)
	}
	ss := ast.NewSchemaSet()
	ss.Put(ast.SchemaRootRef, withoutDescriptions(doc))
	return ss, nil
})

// withoutDescriptions drops the "description" keywords of a JSON Schema document (in place):
// the compiler parses the schema on every compile, and the descriptions are most of its size.
// A "description" inside "properties" names a field and is kept.
func withoutDescriptions(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, sub := range x {
			if k == "properties" {
				if props, ok := sub.(map[string]any); ok {
					for name, p := range props {
						props[name] = withoutDescriptions(p)
					}
					continue
				}
			}
			if k == "description" {
				if _, ok := sub.(string); ok {
					delete(x, k)
					continue
				}
			}
			x[k] = withoutDescriptions(sub)
		}
	case []any:
		for i := range x {
			x[i] = withoutDescriptions(x[i])
		}
	}
	return v
}

// schemaHint says where the input fields are documented and how to run the same check with
// bare opa; it ends every message of explainRefError.
const schemaHint = "see docs/reference/policy-input.md; authors using bare opa get the same check with `opa check --schema docs/policy-input.schema.json`"

// explainRefError rewrites the message of a type error about a field that does not exist (OPA's
// "undefined ref" with the allowed keys) so that it names the field, the fields it could have
// meant (closest by edit distance first) and where the fields are documented. Other errors keep
// their message.
func explainRefError(e *ast.Error) string {
	d, ok := e.Details.(*ast.RefErrInvalidDetail)
	if e.Code != ast.TypeErr || !ok || len(d.OneOf) == 0 || d.Pos <= 0 || d.Pos >= len(d.Ref) {
		return e.Message
	}
	key, ok := d.Ref[d.Pos].Value.(ast.String)
	if !ok {
		return e.Message
	}
	fields := make([]string, 0, len(d.OneOf))
	for _, v := range d.OneOf {
		if s, ok := v.(ast.String); ok {
			fields = append(fields, string(s))
		}
	}
	if len(fields) == 0 {
		return e.Message
	}
	parent := d.Ref[:d.Pos].String()
	ranked := rankByDistance(string(key), fields)
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s has no field %q", e.Message, parent, string(key))
	if near := ranked[0]; isTypo(string(key), near) {
		fmt.Fprintf(&b, "; did you mean %q?", near)
	}
	fmt.Fprintf(&b, " (fields of %s, closest first: %s", parent, strings.Join(ranked, ", "))
	b.WriteString("; " + schemaHint + ")")
	return b.String()
}

// isTypo reports whether have is likely a misspelling of want: an edit distance of at most a
// third of the name (at least 2), or one name a prefix of the other ("server" for "server_id").
func isTypo(have, want string) bool {
	return levenshtein(have, want) <= max(2, len(have)/3) || strings.HasPrefix(want, have) || strings.HasPrefix(have, want)
}

// rankByDistance returns names sorted by edit distance to s, ties by name.
func rankByDistance(s string, names []string) []string {
	out := slices.Clone(names)
	slices.SortStableFunc(out, func(a, b string) int {
		if da, db := levenshtein(s, a), levenshtein(s, b); da != db {
			return da - db
		}
		return strings.Compare(a, b)
	})
	return out
}

// levenshtein is the edit distance (insertions, deletions, substitutions) of two byte strings.
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

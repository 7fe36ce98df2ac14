package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/util"
)

// The type check of OPA's compiler (typecheck.go) sees input.load_balancer.locaton, but not the
// literal key of object.get(input.load_balancer, "locaton", ""), the form docs/policy.md
// recommends for fields that may be omitted: object.get takes any key. objectGetKeyProblems
// checks those keys against the same input schema.

// objectGetSchema is the input schema as a JSON document, for objectGetKeyProblems: its own copy,
// built once, as the compiler's (inputSchema) is handed to OPA.
var objectGetSchema = sync.OnceValues(func() (*schemaDoc, error) {
	var doc map[string]any
	if err := util.UnmarshalJSON(InputSchema(), &doc); err != nil {
		return nil, fmt.Errorf("build the policy input schema: %w", err)
	}
	defs, _ := doc["definitions"].(map[string]any)
	s := &schemaDoc{defs: defs}
	s.root = s.resolve(doc)
	if s.root == nil {
		return nil, errors.New("build the policy input schema: no root object")
	}
	return s, nil
})

// schemaDoc navigates the input schema: objects with "properties" (closed by
// "additionalProperties": false), maps ("additionalProperties": SCHEMA), arrays ("items"), and
// "$ref" to "#/definitions/NAME", which is all the generator writes. Were it to write more (say
// "anyOf"), the check would find keyUnknown there and check less, never reject a good key; the
// typo rows of TestSchema_objectGetKeys would then fail.
type schemaDoc struct {
	defs map[string]any
	root map[string]any
}

// resolve follows a "$ref"; it returns nil for what is not a schema object.
func (s *schemaDoc) resolve(v any) map[string]any {
	n, _ := v.(map[string]any)
	if ref, ok := n["$ref"].(string); ok {
		def, _ := s.defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
		return def
	}
	return n
}

// keyStatus is what the schema says about one key of an object.
type keyStatus int

const (
	keyUnknown keyStatus = iota // the schema cannot tell (not an object, or open to any key)
	keyFound
	keyMissing // a closed object without that field
)

// key returns the schema of the field key of the object schema n.
func (s *schemaDoc) key(n map[string]any, key string) (map[string]any, keyStatus) {
	if props, ok := n["properties"].(map[string]any); ok {
		if sub, ok := props[key]; ok {
			return s.resolve(sub), keyFound
		}
	}
	switch extra := n["additionalProperties"].(type) {
	case map[string]any: // a map such as labels: any key
		return s.resolve(extra), keyFound
	case bool:
		if !extra && n["properties"] != nil {
			return nil, keyMissing
		}
	}
	return nil, keyUnknown
}

// element returns the schema of an element of an array or a value of a map, or nil.
func (s *schemaDoc) element(n map[string]any) map[string]any {
	if items, ok := n["items"]; ok {
		return s.resolve(items)
	}
	if extra, ok := n["additionalProperties"].(map[string]any); ok {
		return s.resolve(extra)
	}
	return nil
}

// fieldNames returns the field names of the object schema n, sorted.
func fieldNames(n map[string]any) []string {
	props, _ := n["properties"].(map[string]any)
	return sortedKeys(props)
}

// at returns the schema of the input reference ref (input.a.b[_].c), or nil when the schema
// cannot tell: a field the schema lacks here is the compiler's type error, not this check's.
func (s *schemaDoc) at(ref ast.Ref) map[string]any {
	n := s.root
	for _, t := range ref[1:] {
		if n == nil {
			return nil
		}
		if str, ok := t.Value.(ast.String); ok {
			n, _ = s.key(n, string(str))
			continue
		}
		n = s.element(n) // an index or a variable: an array element or a map value
	}
	return n
}

// objectGetKeyProblems returns a problem for each literal key of object.get on an input
// reference that the input schema does not have: object.get(input.load_balancer, "locaton", "")
// and object.get(input.cluster, ["network", "ip_rang"], "") (a path), with file, line, column
// and the field it could have meant. Keys of maps (labels, annotations) are free; a variable
// key, an object that is not read straight from input, or one the schema cannot tell is not
// checked.
func objectGetKeyProblems(m *ast.Module, s *schemaDoc) []Problem {
	imports := inputImports(m)
	var problems []Problem
	check := func(op *ast.Term, args []*ast.Term) {
		if len(args) < 2 || !op.Equal(objectGetRef) {
			return
		}
		ref, ok := inputRef(args[0], imports)
		if !ok {
			return
		}
		if p, bad := s.checkKeys(ref, args[1]); bad {
			problems = append(problems, p)
		}
	}
	ast.WalkTerms(m, func(t *ast.Term) bool {
		if call, ok := t.Value.(ast.Call); ok && len(call) > 0 {
			check(call[0], call[1:])
		}
		return false
	})
	ast.WalkExprs(m, func(e *ast.Expr) bool {
		if terms, ok := e.Terms.([]*ast.Term); ok && len(terms) > 0 {
			check(terms[0], terms[1:]) // object.get(input.x, "k", d, out) as an expression
		}
		return false
	})
	return problems
}

// objectGetRef is the reference of the object.get built-in, as a call's operator.
var objectGetRef = ast.NewTerm(ast.ObjectGet.Ref())

// inputImports maps the names of the module's imports of input (import input.load_balancer,
// import input.route as r) to the references they stand for.
func inputImports(m *ast.Module) map[ast.Var]ast.Ref {
	out := map[ast.Var]ast.Ref{}
	for _, imp := range m.Imports {
		if ref, ok := imp.Path.Value.(ast.Ref); ok && ref[0].Equal(ast.InputRootDocument) {
			out[imp.Name()] = ref
		}
	}
	return out
}

// inputRef returns the term as a reference rooted at input (input alone included), with an
// imported name replaced by what it imports.
func inputRef(t *ast.Term, imports map[ast.Var]ast.Ref) (ast.Ref, bool) {
	switch v := t.Value.(type) {
	case ast.Var:
		if ref, ok := imports[v]; ok {
			return ref, true
		}
		return ast.Ref{t}, v.Equal(ast.InputRootDocument.Value)
	case ast.Ref:
		if head, ok := v[0].Value.(ast.Var); ok {
			if ref, ok := imports[head]; ok {
				return ref.Concat(v[1:]), true
			}
		}
		return v, v[0].Equal(ast.InputRootDocument)
	}
	return nil, false
}

// checkKeys checks the key (a string, or an array of strings: a path) of object.get on ref.
func (s *schemaDoc) checkKeys(ref ast.Ref, key *ast.Term) (Problem, bool) {
	var path []string
	switch k := key.Value.(type) {
	case ast.String:
		path = []string{string(k)}
	case *ast.Array:
		for i := range k.Len() {
			str, ok := k.Elem(i).Value.(ast.String)
			if !ok {
				return Problem{}, false
			}
			path = append(path, string(str))
		}
	default:
		return Problem{}, false
	}
	n := s.at(ref)
	parent := ref.String()
	for _, name := range path {
		if n == nil {
			return Problem{}, false
		}
		sub, status := s.key(n, name)
		switch status {
		case keyUnknown:
			return Problem{}, false
		case keyMissing:
			p := Problem{Code: "ccm_type_error", Message: missingKeyMessage(parent, name, fieldNames(n))}
			if key.Location != nil {
				p.File, p.Row, p.Col = key.Location.File, key.Location.Row, key.Location.Col
			}
			return p, true
		case keyFound:
		}
		n, parent = sub, parent+"."+name
	}
	return Problem{}, false
}

// missingKeyMessage says that parent has no field key, what it could have meant and where the
// fields are documented, as explainRefError does for the compiler's type errors.
func missingKeyMessage(parent, key string, fields []string) string {
	ranked := rankByDistance(key, fields)
	var b strings.Builder
	fmt.Fprintf(&b, "object.get key %q: %s has no field %q", key, parent, key)
	if len(ranked) > 0 && isTypo(key, ranked[0]) {
		fmt.Fprintf(&b, "; did you mean %q?", ranked[0])
	}
	fmt.Fprintf(&b, " (fields of %s, closest first: %s; see docs/reference/policy-input.md; opa check --schema does not check object.get keys)",
		parent, strings.Join(ranked, ", "))
	return b.String()
}

// sortProblems orders problems by file, row and column, stable for the rest.
func sortProblems(ps []Problem) []Problem {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		if a.Row != b.Row {
			return a.Row - b.Row
		}
		return a.Col - b.Col
	})
	return ps
}

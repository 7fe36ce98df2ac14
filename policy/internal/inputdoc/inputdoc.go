// Package inputdoc generates the policy input reference (Markdown) and its JSON Schema from the
// Go source of policy/input/input.go: the struct types reachable from Input, their json tags and doc
// comments, and the Action* and InputVersion constants.
//
// It reads source rather than using reflection so that the doc comments, the part operators
// read, come along. The command policy/internal/gendoc runs it (`go generate ./...`, make
// generate); TestGeneratedCurrent in policy regenerates and diffs, so the docs cannot drift from
// the code.
package inputdoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strconv"
	"strings"
)

// Paths of the generated files, relative to the module root.
const (
	MarkdownPath = "docs/reference/policy-input.md"
	SchemaPath   = "docs/policy-input.schema.json"
)

// field is one JSON field of a struct type.
type field struct {
	name      string // JSON name
	doc       string
	typ       ast.Expr
	omitempty bool
}

// structType is one struct type of input.go.
type structType struct {
	name   string
	doc    string
	ast    *ast.StructType
	fields []field
}

// model is what Generate reads from input.go.
type model struct {
	version string
	actions []string
	// operations are input.operation's values (policy.Operations).
	operations []string
	types      map[string]*structType
	order      []string // types reachable from Input, breadth first
}

// Generate returns the Markdown reference and the JSON Schema for the Go source src of
// policy/input/input.go, with operations (policy.Operations) as the values of input.operation.
func Generate(src []byte, operations []string) (markdown, schema []byte, err error) {
	m, err := parse(src)
	if err != nil {
		return nil, nil, fmt.Errorf("inputdoc: %w", err)
	}
	if len(operations) == 0 {
		return nil, nil, fmt.Errorf("gendoc: no operations (policy.Operations, generated from the mutation kinds)")
	}
	m.operations = operations
	schema, err = m.schema()
	if err != nil {
		return nil, nil, fmt.Errorf("inputdoc: %w", err)
	}
	return m.markdown(), schema, nil
}

func parse(src []byte) (*model, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "input.go", src, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("parse input.go: %w", err)
	}
	m := &model{types: map[string]*structType{}}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range gd.Specs {
			switch s := spec.(type) {
			case *ast.ValueSpec:
				for i, n := range s.Names {
					if i >= len(s.Values) {
						continue
					}
					lit, ok := s.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					switch {
					case n.Name == "InputVersion":
						m.version = v
					case strings.HasPrefix(n.Name, "Action"):
						m.actions = append(m.actions, v)
					}
				}
			case *ast.TypeSpec:
				st, ok := s.Type.(*ast.StructType)
				if !ok {
					continue
				}
				doc := s.Doc
				if doc == nil {
					doc = gd.Doc
				}
				m.types[s.Name.Name] = &structType{name: s.Name.Name, doc: doc.Text(), ast: st}
			}
		}
	}
	if m.version == "" || len(m.actions) == 0 || m.types["Input"] == nil {
		return nil, fmt.Errorf("input.go: want InputVersion, Action* constants and type Input")
	}
	seen := map[string]bool{"Input": true}
	queue := []string{"Input"}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		m.order = append(m.order, name)
		if err := m.types[name].parseFields(); err != nil {
			return nil, err
		}
		for _, f := range m.types[name].fields {
			if ref := m.refOf(f.typ); ref != "" && !seen[ref] {
				seen[ref] = true
				queue = append(queue, ref)
			}
		}
	}
	return m, nil
}

// parseFields reads the JSON fields of t.
func (t *structType) parseFields() error {
	for _, fl := range t.ast.Fields.List {
		if fl.Tag == nil || len(fl.Names) != 1 {
			return fmt.Errorf("%s: every field needs a json tag and its own line", t.name)
		}
		tag, _ := strconv.Unquote(fl.Tag.Value)
		name, opts, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
		if name == "" || name == "-" {
			return fmt.Errorf("%s.%s: missing json name", t.name, fl.Names[0].Name)
		}
		if fl.Doc == nil {
			return fmt.Errorf("%s.%s: missing doc comment (it becomes the field's documentation)", t.name, fl.Names[0].Name)
		}
		t.fields = append(t.fields, field{name: name, doc: fl.Doc.Text(), typ: fl.Type, omitempty: opts == "omitempty"})
	}
	return nil
}

// refOf returns the struct type a field refers to (through pointers, slices and map values), or "".
func (m *model) refOf(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return m.refOf(t.X)
	case *ast.ArrayType:
		return m.refOf(t.Elt)
	case *ast.MapType:
		return m.refOf(t.Value)
	case *ast.Ident:
		if m.types[t.Name] != nil {
			return t.Name
		}
	}
	return ""
}

// describe returns the Markdown type of a Go type expression.
func (m *model) describe(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return m.describe(t.X) + " or null"
	case *ast.ArrayType:
		return "array of " + m.describe(t.Elt) + " (or null)"
	case *ast.MapType:
		return "object of " + m.describe(t.Key) + " to " + m.describe(t.Value) + " (or null)"
	case *ast.Ident:
		switch t.Name {
		case "string":
			return "string"
		case "bool":
			return "boolean"
		case "int", "int32", "int64":
			return "integer"
		case "float64":
			return "number"
		}
		if m.types[t.Name] != nil {
			return "[" + t.Name + "](#" + strings.ToLower(t.Name) + ")"
		}
	}
	return "unknown"
}

// jsonType returns the JSON Schema of a Go type expression.
func (m *model) jsonType(e ast.Expr) (map[string]any, error) {
	switch t := e.(type) {
	case *ast.StarExpr:
		// A nullable struct is written out in place as {"type": ["object", "null"],
		// "properties": ...}, not as anyOf [{"$ref": ...}, {"type": "null"}]: OPA's type checker
		// (opa check --schema, and the CCM's own check) turns such an anyOf into a union it does
		// not check fields below, so input.route.destinaton would pass. TestSchema_typesNested
		// in package policy proves the nested check.
		if id, ok := t.X.(*ast.Ident); ok && m.types[id.Name] != nil {
			return m.structSchema(id.Name, true)
		}
		inner, err := m.jsonType(t.X)
		if err != nil {
			return nil, err
		}
		return map[string]any{"anyOf": []any{inner, map[string]any{"type": "null"}}}, nil
	case *ast.ArrayType:
		inner, err := m.jsonType(t.Elt)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": []string{"array", "null"}, "items": inner}, nil
	case *ast.MapType:
		inner, err := m.jsonType(t.Value)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": []string{"object", "null"}, "additionalProperties": inner}, nil
	case *ast.Ident:
		switch t.Name {
		case "string":
			return map[string]any{"type": "string"}, nil
		case "bool":
			return map[string]any{"type": "boolean"}, nil
		case "int", "int32", "int64":
			return map[string]any{"type": "integer"}, nil
		case "float64":
			return map[string]any{"type": "number"}, nil
		}
		if m.types[t.Name] != nil {
			return map[string]any{"$ref": "#/definitions/" + t.Name}, nil
		}
	}
	return nil, fmt.Errorf("unsupported field type %T %v: extend inputdoc", e, e)
}

func oneLine(doc string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(doc), " "), "|", `\|`)
}

func (m *model) markdown() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!-- Code generated by policy/internal/gendoc from policy/input/input.go; DO NOT EDIT. -->\n\n")
	fmt.Fprintf(&b, "# Policy input reference (%s)\n\n", m.version)
	fmt.Fprintf(&b, "Every mutation of Hetzner Cloud is decided on one JSON document, `input`, described here.\n")
	fmt.Fprintf(&b, "The CCM evaluates `data.ccm.deny` and `data.ccm.warn` with it; see the [policy guide](../policy.md).\n")
	fmt.Fprintf(&b, "The same document as JSON Schema (draft-07): [policy-input.schema.json](../policy-input.schema.json).\n\n")
	fmt.Fprintf(&b, "`input.version` is `%q`. It changes only when a field changes meaning or disappears; new fields\n", m.version)
	fmt.Fprintf(&b, "keep the version, so policies should not reject unknown fields.\n\n")
	fmt.Fprintf(&b, "Values: `null` stands for an absent object, list or map; a field marked *omitted when zero* is left\n")
	fmt.Fprintf(&b, "out instead of being 0 or \"\" (test it with `object.get`).\n\n")
	fmt.Fprintf(&b, "## Actions\n\n`input.action` is one of:\n\n")
	for _, a := range m.actions {
		fmt.Fprintf(&b, "- `%s`\n", a)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "## Operations\n\n`input.operation` is one of (the mutation kinds of ccm/lbplan and ccm/routeplan):\n\n")
	for _, o := range m.operations {
		fmt.Fprintf(&b, "- `%s`\n", o)
	}
	b.WriteString("\n")
	for _, name := range m.order {
		t := m.types[name]
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", name, strings.TrimSpace(t.doc))
		fmt.Fprintf(&b, "| field | type | description |\n|---|---|---|\n")
		for _, f := range t.fields {
			desc := oneLine(f.doc)
			if f.omitempty {
				desc += " *Omitted when zero.*"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.name, m.describe(f.typ), desc)
		}
		b.WriteString("\n")
	}
	return b.Bytes()
}

// structSchema returns the JSON Schema of the struct type name: an object of its fields, no
// others ("additionalProperties": false, so a validator and OPA's type checker both refuse an
// unknown field), or null too when nullable.
func (m *model) structSchema(name string, nullable bool) (map[string]any, error) {
	t := m.types[name]
	props := map[string]any{}
	required := []string{}
	for _, f := range t.fields {
		s, err := m.jsonType(f.typ)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", name, f.name, err)
		}
		s["description"] = oneLine(f.doc)
		if name == "Input" && f.name == "version" {
			s["const"] = m.version
		}
		if name == "Input" && f.name == "action" {
			s["enum"] = m.actions
		}
		if name == "Input" && f.name == "operation" {
			s["description"] = oneLine(f.doc) + " One of: " + strings.Join(m.operations, ", ") + "."
		}
		props[f.name] = s
		if !f.omitempty {
			required = append(required, f.name)
		}
	}
	var typ any = "object"
	if nullable {
		typ = []string{"object", "null"}
	}
	return map[string]any{
		"type":                 typ,
		"description":          oneLine(t.doc),
		"properties":           props,
		"required":             required,
		"additionalProperties": false,
	}, nil
}

func (m *model) schema() ([]byte, error) {
	defs := map[string]any{}
	for _, name := range m.order {
		def, err := m.structSchema(name, false)
		if err != nil {
			return nil, err
		}
		defs[name] = def
	}
	doc := map[string]any{
		"$schema":     "http://json-schema.org/draft-07/schema#",
		"$id":         "https://github.com/policy-ccm/hcloud-policy-ccm/docs/policy-input.schema.json",
		"title":       "hcloud-policy-ccm policy input " + m.version,
		"description": "The input document of every policy decision. Generated from policy/input/input.go; DO NOT EDIT.",
		"$ref":        "#/definitions/Input",
		"definitions": defs,
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

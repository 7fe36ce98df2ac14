package plugins

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestSchema_matchesTypes checks each committed JSON Schema against the host's Go type of the
// same request or reply: the same properties, the JSON type of each, required exactly for the
// fields the host always sends (no omitempty), and replies closed (additionalProperties
// false: the host decodes them strictly).
func TestSchema_matchesTypes(t *testing.T) {
	tests := []struct {
		hook  string
		reply bool
		typ   any
	}{
		{HookNodeLabels, false, NodeInput{}},
		{HookNodeLabels, true, NodeLabelsReply{}},
		{HookLoadBalancerName, false, LoadBalancerNameInput{}},
		{HookLoadBalancerName, true, LoadBalancerNameReply{}},
	}
	for _, tc := range tests {
		t.Run(schemaPath(tc.hook, tc.reply), func(t *testing.T) {
			b, err := Schema(tc.hook, tc.reply)
			if err != nil {
				t.Fatal(err)
			}
			var s map[string]any
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatalf("schema is not JSON: %v", err)
			}
			for _, problem := range schemaMismatches("$", reflect.TypeOf(tc.typ), s) {
				t.Error(problem)
			}
			if ap, ok := s["additionalProperties"]; tc.reply && ap != false {
				t.Errorf("a reply schema must set additionalProperties false (strict decoding), got %v (set: %v)", ap, ok)
			}
		})
	}
	if _, err := Schema("nope", false); err == nil {
		t.Error("Schema of an unknown hook did not fail")
	}
}

// TestSchemaMismatches_findsDrift proves the checker fails: a type with a field the schema
// lacks, a wrong JSON type and a wrong required list.
func TestSchemaMismatches_findsDrift(t *testing.T) {
	type drift struct {
		A string `json:"a"`
		B int    `json:"b,omitempty"`
		C string `json:"c"`
	}
	s := map[string]any{"type": "object", "required": []any{"a", "b"}, "properties": map[string]any{
		"a": map[string]any{"type": "string"},
		"b": map[string]any{"type": "string"},
	}}
	got := strings.Join(schemaMismatches("$", reflect.TypeOf(drift{}), s), "\n")
	for _, want := range []string{`$: required`, `$.b: schema type`, `$: properties`} {
		if !strings.Contains(got, want) {
			t.Errorf("mismatches %q lack %q", got, want)
		}
	}
}

// schemaMismatches compares the schema node s with the Go type typ as encoding/json encodes it.
func schemaMismatches(path string, typ reflect.Type, s map[string]any) []string {
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	want := map[reflect.Kind]string{
		reflect.String: "string", reflect.Int: "integer", reflect.Int64: "integer",
		reflect.Float64: "number", reflect.Struct: "object", reflect.Map: "object", reflect.Slice: "array",
	}[typ.Kind()]
	if !schemaTypes(s)[want] {
		return []string{path + ": schema type " + strings.Join(keys(schemaTypes(s)), ",") + ", Go type " + typ.String() + " encodes as " + want}
	}
	switch typ.Kind() {
	case reflect.Map:
		ap, _ := s["additionalProperties"].(map[string]any)
		return schemaMismatches(path+"[*]", typ.Elem(), ap)
	case reflect.Slice:
		items, _ := s["items"].(map[string]any)
		return schemaMismatches(path+"[]", typ.Elem(), items)
	case reflect.Struct:
		return structMismatches(path, typ, s)
	}
	return nil
}

func structMismatches(path string, typ reflect.Type, s map[string]any) []string {
	props, _ := s["properties"].(map[string]any)
	var problems, names, required []string
	for f := range typ.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		names = append(names, name)
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
		if p, ok := props[name].(map[string]any); ok {
			problems = append(problems, schemaMismatches(path+"."+name, f.Type, p)...)
		}
	}
	if got := keys(props); !slices.Equal(got, sorted(names)) {
		problems = append(problems, path+": properties "+strings.Join(got, ",")+", Go fields "+strings.Join(sorted(names), ","))
	}
	var gotReq []string
	for _, r := range asSlice(s["required"]) {
		gotReq = append(gotReq, r.(string))
	}
	if !slices.Equal(sorted(gotReq), sorted(required)) {
		problems = append(problems, path+": required "+strings.Join(sorted(gotReq), ",")+", Go fields without omitempty "+strings.Join(sorted(required), ","))
	}
	return problems
}

// schemaTypes returns the set of JSON types of a schema node ("type": "x" or ["x", "null"]).
func schemaTypes(s map[string]any) map[string]bool {
	set := map[string]bool{}
	switch t := s["type"].(type) {
	case string:
		set[t] = true
	case []any:
		for _, x := range t {
			set[x.(string)] = true
		}
	}
	return set
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return sorted(out)
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

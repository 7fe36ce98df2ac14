package gate

import (
	"reflect"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// TestDigest_coversEveryInputField walks every field reachable from input.Input by
// reflection (pointers followed, one element of each slice and map) and changes each one in
// turn: the digest of the denial cache (inputsDigest, Gate.Digest's and DeniedError.Inputs')
// must change with it, so no field of the policy input, now or added later, can leave a stale
// denial. A field the walk cannot change (unexported, or of a kind it does not know) fails the
// test too: teach the walk, do not skip the field.
func TestDigest_coversEveryInputField(t *testing.T) {
	digest := func(in input.Input) string { return inputsDigest("r1", []StepInput{{Input: in}}) }
	base := fullInput(t)
	want := digest(base)
	if want == "" || digest(fullInput(t)) != want {
		t.Fatal("the digest of one input is empty or differs between two equal inputs")
	}
	paths := leafPaths(t, reflect.TypeFor[input.Input](), "input")
	if len(paths) < 40 {
		t.Fatalf("walked %d fields of input.Input, want them all (more than 40)", len(paths))
	}
	for _, p := range paths {
		in := fullInput(t)
		p.change(reflect.ValueOf(&in).Elem())
		if digest(in) == want {
			t.Errorf("changing %s leaves the digest as it is: a denial would be answered for an input the policy never saw", p.name)
		}
	}
	if inputsDigest("r2", []StepInput{{Input: base}}) == want {
		t.Error("another policy revision leaves the digest as it is")
	}
}

// leafPath is one field of input.Input below pointers, slices and maps, and how to change it.
type leafPath struct {
	name   string
	change func(v reflect.Value) // v is the input.Input, as filled by fill
}

// leafPaths lists the leaves reachable from t (a struct), named from name.
func leafPaths(t *testing.T, typ reflect.Type, name string) []leafPath {
	t.Helper()
	var out []leafPath
	for i := range typ.NumField() {
		f := typ.Field(i)
		fname := name + "." + strings.Split(f.Tag.Get("json"), ",")[0]
		if !f.IsExported() {
			t.Errorf("%s (%s) is unexported: the policy never sees it, so it does not belong in the input", fname, f.Name)
			continue
		}
		for _, leaf := range leavesOf(t, f.Type, fname) {
			out = append(out, leafPath{name: leaf.name, change: func(v reflect.Value) { leaf.change(v.Field(i)) }})
		}
	}
	return out
}

// leavesOf lists the leaves of a value of type typ, each changed through a function of that
// value (filled by fill).
func leavesOf(t *testing.T, typ reflect.Type, name string) []leafPath {
	t.Helper()
	switch typ.Kind() {
	case reflect.Pointer:
		return wrap(leavesOf(t, typ.Elem(), name), reflect.Value.Elem)
	case reflect.Slice:
		return wrap(leavesOf(t, typ.Elem(), name+"[0]"), func(v reflect.Value) reflect.Value { return v.Index(0) })
	case reflect.Map:
		if typ.Key().Kind() != reflect.String {
			t.Errorf("%s is a %s, which the walk does not change yet", name, typ)
			return nil
		}
		if typ.Elem().Kind() == reflect.String {
			return []leafPath{{name: name + "{}", change: func(v reflect.Value) {
				v.SetMapIndex(reflect.ValueOf("k"), reflect.ValueOf("changed"))
			}}}
		}
		// Map elements are not addressable: change a copy of the element "k" and store it back.
		leaves := leavesOf(t, typ.Elem(), name+"{k}")
		for i, l := range leaves {
			leaves[i].change = func(v reflect.Value) {
				k := reflect.ValueOf("k")
				e := reflect.New(typ.Elem()).Elem()
				e.Set(v.MapIndex(k))
				l.change(e)
				v.SetMapIndex(k, e)
			}
		}
		return leaves
	case reflect.Struct:
		return leafPaths(t, typ, name)
	case reflect.String:
		return []leafPath{{name: name, change: func(v reflect.Value) { v.SetString(v.String() + "-changed") }}}
	case reflect.Bool:
		return []leafPath{{name: name, change: func(v reflect.Value) { v.SetBool(!v.Bool()) }}}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return []leafPath{{name: name, change: func(v reflect.Value) { v.SetInt(v.Int() + 1) }}}
	case reflect.Float64:
		return []leafPath{{name: name, change: func(v reflect.Value) { v.SetFloat(v.Float() + 0.01) }}}
	}
	t.Errorf("%s is of kind %s, which the walk does not change yet", name, typ.Kind())
	return nil
}

// wrap makes the changes of leaves apply to the value that inner reaches from.
func wrap(leaves []leafPath, inner func(reflect.Value) reflect.Value) []leafPath {
	for i, l := range leaves {
		leaves[i].change = func(v reflect.Value) { l.change(inner(v)) }
	}
	return leaves
}

// fullInput is a input.Input with every pointer set, one element in every slice and map and
// every leaf non-zero (fill).
func fullInput(t *testing.T) input.Input {
	t.Helper()
	var in input.Input
	fill(t, reflect.ValueOf(&in).Elem())
	return in
}

// fill sets v and everything below it to non-zero values.
func fill(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		e := reflect.New(v.Type().Elem()).Elem()
		fill(t, e)
		v.SetMapIndex(reflect.ValueOf("k"), e)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i))
			}
		}
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Float64:
		v.SetFloat(1.5)
	default:
		t.Errorf("fill: kind %s of %s is not filled yet", v.Kind(), v.Type())
	}
}

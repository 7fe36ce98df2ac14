package policy

import (
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// fill sets every field reachable from v to a non-zero value, so that a field added to input/input.go
// but not to inputValue makes TestInputValue fail.
func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + string(rune('a'+*n%26)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Float64:
		v.SetFloat(float64(*n) + 0.25)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), n)
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fill(v.Index(0), n)
		fill(v.Index(1), n)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, n)
			fill(e, n)
			v.SetMapIndex(k, e)
		}
	default:
		panic("fill: unsupported kind " + v.Kind().String() + ": extend fill and inputValue")
	}
}

func TestInputValue(t *testing.T) {
	var full input.Input
	n := 0
	fill(reflect.ValueOf(&full).Elem(), &n)
	sample, err := ReadInputFile(filepath.Join("..", "examples", "policies", "inputs", "lb_update_change_type.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   input.Input
	}{
		{name: "The zero input encodes like JSON", in: input.Input{}},
		{name: "An input with every field set encodes like JSON", in: full},
		{name: "The same input again, its inventory entries from the term cache (lbTerms)", in: full},
		{name: "An input with empty collections encodes like JSON", in: input.Input{
			Service:      &input.Service{Labels: map[string]string{}, Ports: []input.ServicePort{}, LoadBalancerSourceRanges: []string{}},
			LoadBalancer: &input.LoadBalancer{Services: []input.LBService{}, Targets: []input.LBTarget{{Type: "ip", IP: "10.0.0.1"}}},
		}},
		{name: "A sample input encodes like JSON", in: sample},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, err := ast.InterfaceToValue(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := inputValue(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got.Compare(want) != 0 {
				t.Fatalf("inputValue =\n%v\nwant (JSON encoding)\n%v", got, want)
			}
		})
	}
}

package hcloudclient_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
)

// TestReaders_haveNoWriteMethod: the method set of every reader (value and pointer) holds only
// reads, so no type assertion or conversion of a reader finds a write method, and every field is
// unexported, so no caller reaches the hcloud-go client inside.
func TestReaders_haveNoWriteMethod(t *testing.T) {
	reads := []string{"Get", "List", "All"}
	tests := []struct {
		reader any
		want   []string
	}{
		{hcloudclient.LoadBalancerReader{}, []string{"All", "GetByID", "GetByName", "List"}},
		{hcloudclient.ServerReader{}, []string{"All", "GetByID", "GetByName"}},
		{hcloudclient.NetworkReader{}, []string{"Get", "GetByID"}},
		{hcloudclient.CertificateReader{}, []string{"GetByName", "List"}},
		{hcloudclient.LoadBalancerTypeReader{}, []string{"All"}},
	}
	for _, tc := range tests {
		rt := reflect.TypeOf(tc.reader)
		t.Run(rt.Name(), func(t *testing.T) {
			pt := reflect.PointerTo(rt)
			var got []string
			for i := range pt.NumMethod() {
				name := pt.Method(i).Name
				got = append(got, name)
				if !slices.ContainsFunc(reads, func(p string) bool { return strings.HasPrefix(name, p) }) {
					t.Errorf("%s has the method %s, which is not a read", rt, name)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("methods of *%s = %v, want %v", rt, got, tc.want)
			}
			for i := range rt.NumField() {
				if f := rt.Field(i); f.IsExported() {
					t.Errorf("%s has the exported field %s", rt, f.Name)
				}
			}
		})
	}
}

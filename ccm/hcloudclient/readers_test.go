package hcloudclient_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
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

// TestReaders_refuseWrites: the readers' hcloud-go client sends through ReadOnlyTransport, so a
// write that reaches it past the compiler and TestOnlyTheExecutorCanWriteToHetzner (here with
// reflect and package unsafe, the way issue 30 names) is refused before it leaves the process,
// and their answers, errors included, do not carry the token a write by hand would need. A
// client built from ClientOptions (the executor's writing client) still writes.
func TestReaders_refuseWrites(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t)
	id, err := emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := hcloudclient.New(hcloudclient.Options{Config: emulatorConfig(endpoint, emu.Token())})
	if err != nil {
		t.Fatal(err)
	}
	reader := conn.LoadBalancers()
	field := reflect.ValueOf(reader).Elem().Field(0)
	inside := reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr())).Elem().Interface().(*hcloud.LoadBalancerClient)
	if _, _, err := inside.DeleteWithResult(t.Context(), &hcloud.LoadBalancer{ID: id}); !errors.Is(err, hcloudclient.ErrWriteRefused) {
		t.Errorf("Delete through the reader's client: err = %v, want ErrWriteRefused", err)
	}
	if _, ok := emu.LoadBalancer(id); !ok {
		t.Error("the load balancer is gone")
	}
	if n := emu.MutatingRequests(); n != 0 {
		t.Errorf("%d mutating requests reached the API", n)
	}

	_, resp, err := reader.GetByID(t.Context(), id)
	if err != nil || resp == nil || resp.Request == nil {
		t.Fatalf("GetByID: %v, %v", resp, err)
	}
	if got := resp.Request.Header.Get("Authorization"); got != "" {
		t.Errorf("the answer's request carries Authorization %q", got)
	}
	emu.AddFault(hcloudemu.Fault{Method: "GET", Pattern: "/v1/load_balancers/*", Times: 1, Code: "forbidden"})
	_, _, err = reader.GetByID(t.Context(), id)
	var apiErr hcloud.Error
	if !errors.As(err, &apiErr) || apiErr.Response() == nil || apiErr.Response().Request == nil {
		t.Fatalf("GetByID with a fault: %v, want an API error with its answer", err)
	}
	if got := apiErr.Response().Request.Header.Get("Authorization"); got != "" {
		t.Errorf("the error's answer carries Authorization %q", got)
	}

	if _, _, err := hcloud.NewClient(conn.ClientOptions()...).LoadBalancer.DeleteWithResult(t.Context(), &hcloud.LoadBalancer{ID: id}); err != nil {
		t.Errorf("Delete through a client of ClientOptions: %v", err)
	}
	if _, ok := emu.LoadBalancer(id); ok {
		t.Error("the writing client did not delete the load balancer")
	}
}

package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk"
)

func TestLabels(t *testing.T) {
	tests := []struct {
		name string
		in   sdk.Server
		want map[string]string
	}{
		{
			name: "A cloud server of 4 cores is small, with its architecture and location",
			in:   sdk.Server{Location: "fsn1", ServerType: &sdk.ServerType{Cores: 4, Architecture: "arm"}},
			want: map[string]string{LabelSize: "small", LabelArch: "arm", LabelLocation: "fsn1"},
		},
		{
			name: "A cloud server of 8 cores is large",
			in:   sdk.Server{ServerType: &sdk.ServerType{Cores: 8, Architecture: "x86"}},
			want: map[string]string{LabelSize: "large", LabelArch: "x86"},
		},
		{
			name: "A Robot server is dedicated",
			in:   sdk.Server{Location: "fsn1", Robot: &sdk.RobotServer{Product: "AX41-NVMe"}},
			want: map[string]string{LabelSize: "dedicated", LabelLocation: "fsn1"},
		},
		{
			name: "Without hardware facts there is no size",
			in:   sdk.Server{Type: "cx22"},
			want: map[string]string{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Labels(sdk.NodeInput{Server: tc.in})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("labels (-want +got):\n%s", d)
			}
		})
	}
}

func TestName(t *testing.T) {
	long := "a-very-long-service-name-that-goes-on-and-on-and-on-beyond-the-limit"
	tests := []struct {
		name, namespace, service, uid, want, err string
	}{
		{name: "parts are lowercased and sanitised", namespace: "Shop", service: "web_front", uid: "7F6C1C4E-2d0b", want: "shop-web-front-7f6c1c4e"},
		{name: "a long name is cut to 63 characters", namespace: "ns", service: long, uid: "12345678", want: ("ns-" + long)[:54] + "-12345678"},
		{name: "a short UID is an error", namespace: "ns", service: "s", uid: "abc", err: "service uid shorter than 8 characters"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Name(sdk.LoadBalancerNameInput{Service: sdk.Service{Namespace: tc.namespace, Name: tc.service, UID: tc.uid}})
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want || len(got) > 63 {
				t.Errorf("Name = %q (%d), %v; want %q", got, len(got), err, tc.want)
			}
		})
	}
}

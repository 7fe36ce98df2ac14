package annotation_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
)

func TestGroup(t *testing.T) {
	tests := []struct {
		name    string
		ann     map[string]string
		want    string
		wantErr string
	}{
		{"unset", nil, "", "not set"},
		{"label", map[string]string{string(annotation.LBGroup): "web-1"}, "web-1", ""},
		{"63 characters", map[string]string{string(annotation.LBGroup): "a23456789012345678901234567890123456789012345678901234567890123"}, "a23456789012345678901234567890123456789012345678901234567890123", ""},
		{"64 characters", map[string]string{string(annotation.LBGroup): "a234567890123456789012345678901234567890123456789012345678901234"}, "", "expect an RFC 1123 DNS label"},
		{"empty", map[string]string{string(annotation.LBGroup): ""}, "", `invalid value for "service.hcloud-policy-ccm.io/load-balancer-group": ""`},
		{"upper case", map[string]string{string(annotation.LBGroup): "Web"}, "", "expect an RFC 1123 DNS label"},
		{"leading dash", map[string]string{string(annotation.LBGroup): "-web"}, "", "expect an RFC 1123 DNS label"},
		{"dot", map[string]string{string(annotation.LBGroup): "web.shop"}, "", "expect an RFC 1123 DNS label"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: tc.ann}}
			got, err := annotation.Group(svc)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Group() error = %v", err)
			case tc.wantErr == "not set" && !errors.Is(err, annotation.ErrNotSet):
				t.Fatalf("Group() error = %v, want ErrNotSet", err)
			case tc.wantErr != "" && tc.wantErr != "not set" && (err == nil || !annotation.IsUserError(err) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Group() error = %v, want a user error containing %q", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("Group() = %q, want %q", got, tc.want)
			}
		})
	}
}

package lbplan_test

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
)

func TestCheckService(t *testing.T) {
	validName := func(n string) error {
		if n == "bad" {
			return errors.New("bad name")
		}
		return nil
	}
	tests := []struct {
		name        string
		annotations map[string]string
		wantErr     string // the annotation the error names; "" for no error
	}{
		{"none", nil, ""},
		{"good selector and name", map[string]string{string(annotation.LBNodeSelector): "role=lb", string(annotation.LBName): "good"}, ""},
		{"bad name", map[string]string{string(annotation.LBName): "bad"}, string(annotation.LBName)},
		{"bad selector", map[string]string{string(annotation.LBNodeSelector): "a=(b"}, string(annotation.LBNodeSelector)},
		{"both bad: the selector first", map[string]string{string(annotation.LBNodeSelector): "a=(b", string(annotation.LBName): "bad"}, string(annotation.LBNodeSelector)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: tt.annotations}}
			err := lbservice.CheckService(svc, validName)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckService: %v, want nil", err)
				}
				return
			}
			var invalid *annotation.InvalidError
			if !errors.As(err, &invalid) || string(invalid.Name) != tt.wantErr {
				t.Fatalf("CheckService: %v, want an *annotation.InvalidError for %s", err, tt.wantErr)
			}
		})
	}
}

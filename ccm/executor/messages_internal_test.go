package executor

import (
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

func TestAnnotationHint(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"an unknown certificate", hcloud.Error{Code: hcloud.ErrorCodeInvalidInput, Message: "certificate 999 not found"}, "load-balancer.hetzner.cloud/http-certificates"},
		{"a field path", hcloud.Error{Code: hcloud.ErrorCodeInvalidInput, Message: "invalid input", Details: hcloud.ErrorDetailsInvalidInput{
			Fields: []hcloud.ErrorDetailsInvalidInputField{{Name: "services[0].health_check.interval"}}}}, "load-balancer.hetzner.cloud/health-check-protocol"},
		{"targets on public IPs", hcloud.Error{Code: hcloud.ErrorCodeTargetsWithoutUsePrivateIP}, "load-balancer.hetzner.cloud/use-private-ip"},
		{"no word inside another word", hcloud.Error{Code: hcloud.ErrorCodeInvalidInput, Message: "multiple problems"}, ""},
		{"another code", hcloud.Error{Code: hcloud.ErrorCodeRateLimitExceeded, Message: "certificate"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := annotationHint(tc.err); got != tc.want {
				t.Errorf("annotationHint() = %q, want %q", got, tc.want)
			}
		})
	}
}

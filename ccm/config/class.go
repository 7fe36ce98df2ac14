package config

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ValidateLoadBalancerClass reports whether name can be a Service's spec.loadBalancerClass:
// a qualified name, as the API server validates the field (an optional DNS subdomain prefix
// and "/", then a name of at most 63 characters of alphanumerics, '-', '_' and '.', starting
// and ending with an alphanumeric), for example "hetzner" or "example.com/hetzner". The error
// lists the API server's reasons; the caller names the flag or variable.
func ValidateLoadBalancerClass(name string) error {
	if msgs := validation.IsQualifiedName(name); len(msgs) > 0 {
		return fmt.Errorf("not a qualified name such as example.com/hetzner: %s", strings.Join(msgs, "; "))
	}
	return nil
}

package annotation

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// groupAccepted is what LBGroup accepts, for the InvalidAnnotation message.
const groupAccepted = "an RFC 1123 DNS label: 1 to 63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit"

// Group returns the load balancer group of svc: ErrNotSet without the annotation, an
// *InvalidError naming the rule for a value that is not an RFC 1123 DNS label (the value goes
// into a Hetzner label and a load balancer name, so it must be one; TestGroup checks it).
func Group(svc *corev1.Service) (string, error) {
	return parse(LBGroup, svc, groupAccepted, func(v string) (string, bool) {
		return v, len(validation.IsDNS1123Label(v)) == 0
	})
}

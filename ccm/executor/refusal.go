package executor

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"k8s.io/cloud-provider/api"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
)

// wrapAPIError prefixes err with the label of m and, for an invalid_input refusal, the
// fields the API named with their messages (as the official CCM adds them) and the annotations
// that set those fields (annotationHints); locked and conflict become retry errors.
func wrapAPIError(m step, err error) error {
	label := m.Label()
	if hcloud.IsError(err, hcloud.ErrorCodeLocked, hcloud.ErrorCodeConflict) {
		return fmt.Errorf("%s: %w", label, api.NewRetryError(fmt.Sprintf("load balancer busy, retrying in %s: %v", RetryAfter, err), RetryAfter))
	}
	msg := "%s: %w"
	if fields := invalidFields(err); fields != "" {
		msg += ": invalid fields: " + strings.ReplaceAll(fields, "%", "%%")
	}
	if names := annotationHints(m, err); len(names) > 0 {
		quoted := make([]string, len(names))
		for i, n := range names {
			quoted[i] = fmt.Sprintf("%q", n)
		}
		msg += " (check " + strings.ReplaceAll(strings.Join(quoted, ", "), "%", "%%") + ")"
	}
	return fmt.Errorf(msg, label, err)
}

// invalidFields lists the fields of an invalid_input refusal as "name (message, message)";
// "" when err names none.
func invalidFields(err error) string {
	var herr hcloud.Error
	if !errors.As(err, &herr) {
		return ""
	}
	d, ok := herr.Details.(hcloud.ErrorDetailsInvalidInput)
	if !ok {
		return ""
	}
	parts := make([]string, 0, len(d.Fields))
	for _, f := range d.Fields {
		parts = append(parts, fmt.Sprintf("%s (%s)", f.Name, strings.Join(f.Messages, ", ")))
	}
	return strings.Join(parts, ", ")
}

// fieldAnnotations maps a request field of the load balancer API, as an invalid_input refusal
// names it (list indexes and the services/targets prefix removed, see fieldKey), to the
// annotation that sets it. Fields that no annotation sets (listen_port, destination_port: the
// Service's ports; labels; network: HCLOUD_NETWORK) are absent. TestAnnotationHints holds one
// row per entry.
var fieldAnnotations = map[string]annotation.Name{
	"name":                           annotation.LBName,
	"load_balancer_type":             annotation.LBType,
	"location":                       annotation.LBLocation,
	"network_zone":                   annotation.LBNetworkZone,
	"algorithm":                      annotation.LBAlgorithmType,
	"algorithm.type":                 annotation.LBAlgorithmType,
	"public_interface":               annotation.LBDisablePublicNetwork,
	"ip_range":                       annotation.LBPrivateSubnetIPRange,
	"use_private_ip":                 annotation.LBUsePrivateIP,
	"protocol":                       annotation.LBSvcProtocol,
	"proxyprotocol":                  annotation.LBSvcProxyProtocol,
	"http":                           annotation.LBSvcProtocol,
	"http.cookie_name":               annotation.LBSvcHTTPCookieName,
	"http.cookie_lifetime":           annotation.LBSvcHTTPCookieLifetime,
	"http.timeout_idle":              annotation.LBSvcHTTPTimeoutIdle,
	"http.certificates":              annotation.LBSvcHTTPCertificates,
	"http.redirect_http":             annotation.LBSvcRedirectHTTP,
	"http.sticky_sessions":           annotation.LBSvcHTTPStickySessions,
	"health_check.protocol":          annotation.LBSvcHealthCheckProtocol,
	"health_check.port":              annotation.LBSvcHealthCheckPort,
	"health_check.interval":          annotation.LBSvcHealthCheckInterval,
	"health_check.timeout":           annotation.LBSvcHealthCheckTimeout,
	"health_check.retries":           annotation.LBSvcHealthCheckRetries,
	"health_check.http":              annotation.LBSvcHealthCheckProtocol,
	"health_check.http.domain":       annotation.LBSvcHealthCheckHTTPDomain,
	"health_check.http.path":         annotation.LBSvcHealthCheckHTTPPath,
	"health_check.http.status_codes": annotation.LBSvcHealthCheckHTTPStatusCodes,
	"health_check.http.tls":          annotation.LBSvcHealthCheckHTTPValidateCertificate,
}

// indexRE matches a list index in a field path (services[0]).
var indexRE = regexp.MustCompile(`\[\d*\]`)

// fieldKey is the fieldAnnotations key of an API field path: services[0].health_check.interval
// and health_check.interval are both health_check.interval.
func fieldKey(field string) string {
	k := strings.ToLower(indexRE.ReplaceAllString(strings.TrimSpace(field), ""))
	for _, prefix := range []string{"services.", "service.", "targets.", "target."} {
		k = strings.TrimPrefix(k, prefix)
	}
	return k
}

// annotationHints names the annotations behind an API refusal of the request of m, so the
// error says what to fix; nil when the refusal points at none. An invalid_input refusal is
// mapped field by field (fieldAnnotation). A refusal without fields (a not_found naming a
// certificate) falls back to whole words of its message.
func annotationHints(m step, err error) []annotation.Name {
	var herr hcloud.Error
	if !errors.As(err, &herr) {
		return nil
	}
	switch herr.Code {
	case hcloud.ErrorCodeTargetsWithoutUsePrivateIP, hcloud.ErrorCodeServerNotAttachedToNetwork:
		return []annotation.Name{annotation.LBUsePrivateIP}
	case hcloud.ErrorCodeLoadBalancerNotAttachedToNetwork, "load_balancer_public_interface_disabled":
		return []annotation.Name{annotation.LBDisablePublicNetwork}
	case hcloud.ErrorCodeInvalidLoadBalancerType:
		return []annotation.Name{annotation.LBType}
	case hcloud.ErrorCodeIPNotAvailable:
		return []annotation.Name{annotation.LBPrivateIPv4}
	case hcloud.ErrorCodeNoSubnetAvailable:
		return []annotation.Name{annotation.LBPrivateSubnetIPRange}
	case hcloud.ErrorCodeInvalidInput, hcloud.ErrorCodeNotFound:
	default:
		return nil
	}
	var out []annotation.Name
	if d, ok := herr.Details.(hcloud.ErrorDetailsInvalidInput); ok {
		for _, f := range d.Fields {
			if n := fieldAnnotation(m, fieldKey(f.Name)); n != "" && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		if len(d.Fields) > 0 {
			return out
		}
	}
	return messageHint(herr.Message)
}

// fieldHinter is a kind whose request has fields that the shared table (fieldAnnotations)
// does not map, or maps to another annotation: the ip of attach_to_network, the type of
// change_algorithm. FieldAnnotation returns the annotation of field key of an invalid_input
// refusal of its request, "" to leave key to the table.
type fieldHinter interface {
	FieldAnnotation(key string) annotation.Name
}

// fieldAnnotation is the annotation of one field key of a refusal of the request of m: its
// kind's (fieldHinter), else the table's.
func fieldAnnotation(m step, key string) annotation.Name {
	if h, ok := m.(fieldHinter); ok {
		if n := h.FieldAnnotation(key); n != "" {
			return n
		}
	}
	return fieldAnnotations[key]
}

// messageHint names the annotation a refusal without fields points at by a whole word of its
// message ("certificate 999 not found"); "ip" never matches inside "multiple".
func messageHint(message string) []annotation.Name {
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(message), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' }) {
		words[strings.TrimSuffix(w, "s")] = true
	}
	for _, h := range []struct {
		word string
		name annotation.Name
	}{
		{"certificate", annotation.LBSvcHTTPCertificates}, {"subnet", annotation.LBPrivateSubnetIPRange},
		{"location", annotation.LBLocation}, {"network_zone", annotation.LBNetworkZone},
		{"load_balancer_type", annotation.LBType}, {"algorithm", annotation.LBAlgorithmType},
	} {
		if words[h.word] {
			return []annotation.Name{h.name}
		}
	}
	return nil
}

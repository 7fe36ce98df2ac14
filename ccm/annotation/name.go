// Package annotation defines the load-balancer.hetzner.cloud/* Service annotations and typed
// accessors for them.
//
// Start with Name and its accessors: each returns the parsed value, ErrNotSet when the Service
// does not carry the annotation, or an *InvalidError naming the annotation, the value and what
// is accepted. Callers use the three-way switch
//
//	v, err := annotation.LBType.String(svc)
//	switch {
//	case err == nil: // use the annotation
//	case errors.Is(err, annotation.ErrNotSet): // fall back to the default
//	default: // a bad value is an error, never ignored
//	}
//
// docs/reference/annotations.md is generated from the constants' doc comments (make generate).
package annotation

//go:generate go run ./internal/gendoc

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/truncate"
)

// ErrNotSet is returned by the accessors when the Service does not carry the annotation.
var ErrNotSet = errors.New("not set")

// Name is the name of a Service annotation.
type Name string

// InvalidError is returned for an annotation whose value does not parse.
type InvalidError struct {
	Name     Name
	Value    string
	Accepted string // what the annotation accepts, e.g. "a bool: true or false"
}

// Error implements error. A long value is truncated (truncate.Value bytes).
func (e *InvalidError) Error() string {
	return fmt.Sprintf("invalid value for %q: %q (expect %s)", string(e.Name), truncate.String(e.Value, truncate.Value), e.Accepted)
}

// Value returns the raw value and whether the annotation is set. Nil services carry nothing.
func (n Name) Value(svc *corev1.Service) (string, bool) {
	if svc == nil {
		return "", false
	}
	v, ok := svc.Annotations[string(n)]
	return v, ok
}

// UsageError is an annotation (or the environment variable behind its default) whose value
// parses but cannot be used as set: a combination that cannot work, a name that does not
// exist. Field is the annotation or variable; the message names it and the fix.
type UsageError struct {
	Field string
	Msg   string
}

// Error implements error.
func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a *UsageError for field with a formatted message.
func Usagef(field, format string, args ...any) error {
	return &UsageError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// IsUserError reports whether err is (or wraps) an annotation error the Service's owner can fix:
// an *InvalidError or a *UsageError.
func IsUserError(err error) bool {
	var ie *InvalidError
	var ue *UsageError
	return errors.As(err, &ie) || errors.As(err, &ue)
}

func (n Name) invalid(v, accepted string) error {
	return &InvalidError{Name: n, Value: v, Accepted: accepted}
}

// parse applies f to the annotation's value; ErrNotSet when absent, an *InvalidError when f
// fails.
func parse[T any](n Name, svc *corev1.Service, accepted string, f func(string) (T, bool)) (T, error) {
	var zero T
	v, ok := n.Value(svc)
	if !ok {
		return zero, ErrNotSet
	}
	t, ok := f(v)
	if !ok {
		return zero, n.invalid(v, accepted)
	}
	return t, nil
}

// String returns the value as is (it may be empty).
func (n Name) String(svc *corev1.Service) (string, error) {
	return parse(n, svc, "a string", func(v string) (string, bool) { return v, true })
}

// NonEmptyString returns the value trimmed; an empty value is invalid.
func (n Name) NonEmptyString(svc *corev1.Service) (string, error) {
	return parse(n, svc, "a non-empty string", func(v string) (string, bool) {
		v = strings.TrimSpace(v)
		return v, v != ""
	})
}

// Bool accepts what strconv.ParseBool accepts (true, false, 1, 0, t, f, ...).
func (n Name) Bool(svc *corev1.Service) (bool, error) {
	return parse(n, svc, "a bool: true or false", func(v string) (bool, bool) {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		return b, err == nil
	})
}

// Int accepts a decimal integer.
func (n Name) Int(svc *corev1.Service) (int, error) {
	return parse(n, svc, "an integer", func(v string) (int, bool) {
		i, err := strconv.Atoi(strings.TrimSpace(v))
		return i, err == nil
	})
}

// Port accepts an integer between 1 and 65535.
func (n Name) Port(svc *corev1.Service) (int, error) {
	return parse(n, svc, "a port: an integer from 1 to 65535", func(v string) (int, bool) {
		i, err := strconv.Atoi(strings.TrimSpace(v))
		return i, err == nil && i >= 1 && i <= 65535
	})
}

// Duration accepts a Go duration (15s, 1m30s), as the official CCM's code does, and a bare
// non-negative integer meaning seconds, as the official CCM's docs say. Negative values are
// invalid.
func (n Name) Duration(svc *corev1.Service) (time.Duration, error) {
	return parse(n, svc, "a duration such as 15s or 1m, or an integer number of seconds", parseDuration)
}

func parseDuration(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if i, err := strconv.ParseInt(v, 10, 32); err == nil {
		return time.Duration(i) * time.Second, i >= 0
	}
	d, err := time.ParseDuration(v)
	return d, err == nil && d >= 0
}

// IPv4 accepts an IPv4 address.
func (n Name) IPv4(svc *corev1.Service) (net.IP, error) {
	return parse(n, svc, "an IPv4 address such as 10.0.0.5", func(v string) (net.IP, bool) {
		ip := net.ParseIP(strings.TrimSpace(v)).To4()
		return ip, ip != nil
	})
}

// CIDR accepts an IP network in CIDR notation (10.0.0.0/24).
func (n Name) CIDR(svc *corev1.Service) (*net.IPNet, error) {
	return parse(n, svc, "a CIDR such as 10.0.0.0/24", func(v string) (*net.IPNet, bool) {
		_, ipn, err := net.ParseCIDR(strings.TrimSpace(v))
		return ipn, err == nil
	})
}

// CSV splits a comma separated list, trimming spaces; empty elements are invalid.
func (n Name) CSV(svc *corev1.Service) ([]string, error) {
	return parse(n, svc, "a comma separated list without empty elements", func(v string) ([]string, bool) {
		var out []string
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	})
}

// Protocol accepts tcp, http or https in any case (HTTP is http), as the official CCM does.
func (n Name) Protocol(svc *corev1.Service) (hcloud.LoadBalancerServiceProtocol, error) {
	return parse(n, svc, "one of tcp, http, https", func(v string) (hcloud.LoadBalancerServiceProtocol, bool) {
		p := hcloud.LoadBalancerServiceProtocol(strings.ToLower(strings.TrimSpace(v)))
		switch p {
		case hcloud.LoadBalancerServiceProtocolTCP, hcloud.LoadBalancerServiceProtocolHTTP, hcloud.LoadBalancerServiceProtocolHTTPS:
			return p, true
		}
		return "", false
	})
}

// Algorithm accepts round_robin or least_connections.
func (n Name) Algorithm(svc *corev1.Service) (hcloud.LoadBalancerAlgorithmType, error) {
	return parse(n, svc, "one of round_robin, least_connections", ParseAlgorithm)
}

// ParseAlgorithm parses a load balancer algorithm in any case (Least_Connections is
// least_connections, as with the official CCM); it is shared with the environment defaults.
func ParseAlgorithm(v string) (hcloud.LoadBalancerAlgorithmType, bool) {
	a := hcloud.LoadBalancerAlgorithmType(strings.ToLower(strings.TrimSpace(v)))
	switch a {
	case hcloud.LoadBalancerAlgorithmTypeRoundRobin, hcloud.LoadBalancerAlgorithmTypeLeastConnections:
		return a, true
	}
	return "", false
}

// CertificateType is managed when the value is exactly managed and uploaded for any other
// value, as the official CCM compares it (Managed, an empty value or a typo mean uploaded: the
// certificates of http-certificates are used). It never returns an *InvalidError.
func (n Name) CertificateType(svc *corev1.Service) (hcloud.CertificateType, error) {
	return parse(n, svc, "uploaded or managed", func(v string) (hcloud.CertificateType, bool) {
		if v == string(hcloud.CertificateTypeManaged) {
			return hcloud.CertificateTypeManaged, true
		}
		return hcloud.CertificateTypeUploaded, true
	})
}

// Selector accepts a Kubernetes label selector (labels.Parse: equality- or set-based).
func (n Name) Selector(svc *corev1.Service) (labels.Selector, error) {
	return parse(n, svc, "a label selector such as role=edge,zone in (a,b)", func(v string) (labels.Selector, bool) {
		s, err := labels.Parse(v)
		return s, err == nil
	})
}

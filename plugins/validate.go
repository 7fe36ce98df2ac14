package plugins

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on plugin replies.
const (
	// MaxLabels is the most labels a node_labels reply may carry.
	MaxLabels = 64
	// MaxLoadBalancerNameLen is the longest load balancer name, in characters: Hetzner's limit
	// (reference/hcloud-api.md: 1–128 characters, ^\S(.*\S)?$).
	MaxLoadBalancerNameLen = 128
)

// ValidateLabels checks labels a plugin wants to add to a node, with the Kubernetes rules
// (implemented here without Kubernetes imports):
//
//   - a key is a qualified name: an optional prefix (a DNS-1123 subdomain of at most 253
//     characters) and '/', then a name of 1 to 63 characters of [A-Za-z0-9-_.] that starts and
//     ends with [A-Za-z0-9];
//   - a value is empty or follows the rule for names;
//   - no key's prefix is or ends in kubernetes.io or k8s.io (the node controller drops them);
//   - at most MaxLabels labels.
//
// It returns every problem in one line, in key order, or nil.
func ValidateLabels(labels map[string]string) error {
	var errs []error
	if len(labels) > MaxLabels {
		errs = append(errs, fmt.Errorf("%d labels, at most %d allowed", len(labels), MaxLabels))
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := validateLabelKey(k); err != nil {
			errs = append(errs, fmt.Errorf("label key %q: %w", k, err))
			continue
		}
		if v := labels[k]; v != "" {
			if err := validateName(v); err != nil {
				errs = append(errs, fmt.Errorf("label %q value %q: %w", k, v, err))
			}
		}
	}
	return joinErrors(errs)
}

func validateLabelKey(k string) error {
	prefix, name, found := strings.Cut(k, "/")
	if !found {
		return validateName(k)
	}
	if prefix == "" {
		return errors.New("prefix must not be empty (a key is [prefix/]name, e.g. example.com/size)")
	}
	if err := validateSubdomain(prefix); err != nil {
		return fmt.Errorf("prefix: %w", err)
	}
	if reservedPrefix(prefix) {
		return errors.New("prefixes kubernetes.io and k8s.io (and their subdomains) are reserved")
	}
	if name == "" {
		return fmt.Errorf("the name part after %q is empty (a key is [prefix/]name, e.g. %ssize)", prefix+"/", prefix+"/")
	}
	if err := validateName(name); err != nil {
		return fmt.Errorf("name part %q: %w", name, err)
	}
	return nil
}

func reservedPrefix(p string) bool {
	p = strings.ToLower(p)
	for _, r := range []string{"kubernetes.io", "k8s.io"} {
		if p == r || strings.HasSuffix(p, "."+r) {
			return true
		}
	}
	return false
}

// validateName checks a label name or value: 1 to 63 characters of [A-Za-z0-9-_.], beginning
// and ending with [A-Za-z0-9]. A character outside the set is named, and a non-ASCII letter
// is said to be one, since "ü" is a letter to its author.
func validateName(s string) error {
	switch {
	case s == "":
		return errors.New("must not be empty")
	case len(s) > 63:
		return fmt.Errorf("%d characters, at most 63 allowed", len(s))
	}
	for i, r := range s {
		if r >= utf8.RuneSelf {
			return fmt.Errorf("character %q is not ASCII: only ASCII letters and digits, '-', '_' and '.' are allowed", r)
		}
		if c := s[i]; !alnum(c) && c != '-' && c != '_' && c != '.' { // ASCII: the rune is this byte
			return fmt.Errorf("character %q not allowed: only ASCII letters and digits, '-', '_' and '.' are allowed", c)
		}
	}
	if !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return errors.New("must begin and end with an ASCII letter or digit")
	}
	return nil
}

// validateSubdomain checks a DNS-1123 subdomain: at most 253 characters, dot-separated labels
// of [a-z0-9-] that begin and end with [a-z0-9].
func validateSubdomain(s string) error {
	if len(s) > 253 {
		return fmt.Errorf("%d characters, at most 253 allowed", len(s))
	}
	for _, l := range strings.Split(s, ".") {
		if err := validateDNSLabel(l, len(s)); err != nil {
			return fmt.Errorf("%q is not a lowercase DNS subdomain: %w", s, err)
		}
	}
	return nil
}

// validateDNSLabel checks [a-z0-9]([-a-z0-9]*[a-z0-9])? of at most maxLen characters. An
// uppercase letter is named as such.
func validateDNSLabel(s string, maxLen int) error {
	switch {
	case s == "":
		return errors.New("empty part between dots")
	case len(s) > maxLen:
		return fmt.Errorf("%d characters, at most %d allowed", len(s), maxLen)
	}
	for i, r := range s {
		switch {
		case r >= 'A' && r <= 'Z':
			return fmt.Errorf("uppercase %q not allowed: a prefix is lowercase (write %q)", r, strings.ToLower(s))
		case r >= utf8.RuneSelf:
			return fmt.Errorf("character %q is not ASCII: only a-z, 0-9 and '-' are allowed (and '.' between parts)", r)
		case !lowerAlnum(s[i]) && r != '-': // ASCII: the rune is this byte
			return fmt.Errorf("character %q not allowed: only a-z, 0-9 and '-' are allowed (and '.' between parts)", r)
		}
	}
	if !lowerAlnum(s[0]) || !lowerAlnum(s[len(s)-1]) {
		return errors.New("each part must begin and end with a lowercase letter or digit")
	}
	return nil
}

// ValidateLoadBalancerName checks a load balancer name with Hetzner's rule: 1 to
// MaxLoadBalancerNameLen characters, no leading or trailing whitespace. It is the one name
// rule of the CCM: the host applies it to what a plugin returns, and ccm/loadbalancer to the
// name annotation, so a name the CCM accepts is one the API accepts.
func ValidateLoadBalancerName(name string) error {
	switch {
	case name == "":
		return errors.New("load balancer name must not be empty")
	case utf8.RuneCountInString(name) > MaxLoadBalancerNameLen:
		return fmt.Errorf("load balancer name %q: %d characters, at most %d allowed", name, utf8.RuneCountInString(name), MaxLoadBalancerNameLen)
	case strings.TrimFunc(name, unicode.IsSpace) != name:
		return fmt.Errorf("load balancer name %q must not begin or end with whitespace", name)
	}
	return nil
}

func alnum(c byte) bool {
	return lowerAlnum(c) || c >= 'A' && c <= 'Z'
}

func lowerAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}

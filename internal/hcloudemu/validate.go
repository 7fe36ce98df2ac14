package hcloudemu

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"
)

// validateName applies the spec's name rules: 1–128 characters, no leading
// or trailing whitespace.
func validateName(name string) *apiError {
	switch {
	case name == "":
		return errInvalid("name", "name is required")
	case len([]rune(name)) > 128:
		return errInvalid("name", "name must be at most 128 characters")
	case strings.TrimFunc(name, unicode.IsSpace) != name:
		return errInvalid("name", "name must not start or end with whitespace")
	}
	return nil
}

// validateLabels applies the label key and value rules (hcloud-go
// hcloud/labels.go) and the reserved hetzner.cloud/ prefix.
func validateLabels(labels map[string]string) *apiError {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case !labelKeyRe.MatchString(k):
			return errInvalid("labels", "label key %q is not correctly formatted", k)
		case strings.HasPrefix(k, "hetzner.cloud/"):
			return errInvalid("labels", "label key %q uses the reserved prefix hetzner.cloud/", k)
		case !labelValueRe.MatchString(labels[k]):
			return errInvalid("labels", "label value %q (key %q) is not correctly formatted", labels[k], k)
		}
	}
	return nil
}

// convert maps one schema type onto another with the same JSON shape (for
// example a create-request service onto an add_service request).
func convert[T any](v any) (T, error) {
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		return out, fmt.Errorf("convert %T: %w", v, err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("convert %T to %T: %w", v, out, err)
	}
	return out, nil
}

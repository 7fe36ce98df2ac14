package plugins_test

import (
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
)

func TestValidateLabels(t *testing.T) {
	many := map[string]string{}
	for i := range plugins.MaxLabels + 1 {
		many["example.com/l"+strings.Repeat("x", i%50)+string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
	}
	tests := []struct {
		name   string
		labels map[string]string
		errs   []string // substrings of the error; none means valid
	}{
		{name: "No labels are valid", labels: nil},
		{name: "A prefixed key and a value are valid", labels: map[string]string{"example.com/pool": "db-1"}},
		{name: "A key without prefix is valid", labels: map[string]string{"pool": "db"}},
		{name: "An empty value is valid", labels: map[string]string{"example.com/flag": ""}},
		{name: "Dots, dashes and underscores inside names are valid", labels: map[string]string{"a.b-c/E.f-G_h": "x.Y-z_0"}},
		{name: "A name of 63 characters is valid", labels: map[string]string{strings.Repeat("n", 63): strings.Repeat("v", 63)}},
		{name: "A prefix of 253 characters is valid", labels: map[string]string{strings.Repeat(strings.Repeat("p", 62)+".", 4) + "a/x": ""}},
		{name: "kubernetes.io is reserved", labels: map[string]string{"kubernetes.io/hostname": "x"}, errs: []string{"reserved"}},
		{name: "Subdomains of k8s.io are reserved", labels: map[string]string{"node.k8s.io/role": "x"}, errs: []string{"reserved"}},
		{name: "Subdomains of kubernetes.io are reserved", labels: map[string]string{"node-role.kubernetes.io/worker": ""}, errs: []string{"reserved"}},
		{name: "A domain merely ending in k8s.io letters is allowed", labels: map[string]string{"notk8s.io/x": "y"}},
		{name: "An empty key is invalid", labels: map[string]string{"": "x"}, errs: []string{"must not be empty"}},
		{name: "An empty prefix is invalid", labels: map[string]string{"/x": "y"}, errs: []string{"prefix must not be empty"}},
		{name: "An empty name after the prefix is named as such", labels: map[string]string{"example.com/": "y"}, errs: []string{`the name part after "example.com/" is empty`}},
		{name: "Two slashes are invalid", labels: map[string]string{"a/b/c": "y"}, errs: []string{`character '/'`}},
		{name: "An uppercase prefix names the letter and the fix", labels: map[string]string{"Example.com/x": "y"}, errs: []string{`uppercase 'E' not allowed: a prefix is lowercase (write "example")`}},
		{name: "An uppercase letter in a middle part of the prefix is named", labels: map[string]string{"a.Bc.com/x": "y"}, errs: []string{`uppercase 'B'`}},
		{name: "A non-ASCII letter in the prefix is named", labels: map[string]string{"bü.com/x": "y"}, errs: []string{`character 'ü' is not ASCII`}},
		{name: "Uppercase in a name is valid", labels: map[string]string{"example.com/Size": "Large"}},
		{name: "A prefix with an empty part is invalid", labels: map[string]string{"example..com/x": "y"}, errs: []string{"empty part between dots"}},
		{name: "A prefix over 253 characters is invalid", labels: map[string]string{strings.Repeat("a.", 127) + "a/x": ""}, errs: []string{"at most 253"}},
		{name: "A name of 64 characters is invalid", labels: map[string]string{strings.Repeat("n", 64): ""}, errs: []string{"at most 63"}},
		{name: "A value of 64 characters is invalid", labels: map[string]string{"k": strings.Repeat("v", 64)}, errs: []string{"at most 63"}},
		{name: "A value ending in a dash is invalid", labels: map[string]string{"k": "v-"}, errs: []string{"begin and end"}},
		{name: "A value with a space is invalid", labels: map[string]string{"k": "a b"}, errs: []string{`character ' '`}},
		{name: "A non-ASCII letter is named and the allowed set said", labels: map[string]string{"k": "grüße"}, errs: []string{`character 'ü' is not ASCII: only ASCII letters and digits, '-', '_' and '.' are allowed`}},
		{name: "A non-ASCII letter at the end is named, not the ends rule", labels: map[string]string{"k": "grü"}, errs: []string{`character 'ü' is not ASCII`}},
		{name: "A non-ASCII letter in a key's name part is named with the part", labels: map[string]string{"example.com/größe": "x"}, errs: []string{`name part "größe": character 'ö' is not ASCII`}},
		{name: "Too many labels are invalid", labels: many, errs: []string{"65 labels, at most 64 allowed"}},
		{name: "Every problem is reported", labels: map[string]string{"a b": "x", "k": "-"}, errs: []string{`label key "a b"`, `label "k" value "-"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := plugins.ValidateLabels(tc.labels)
			if len(tc.errs) == 0 {
				if err != nil {
					t.Errorf("error %v, want none", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.errs)
			}
			for _, e := range tc.errs {
				if !strings.Contains(err.Error(), e) {
					t.Errorf("error %q does not contain %q", err, e)
				}
			}
		})
	}
}

func TestValidateLoadBalancerName(t *testing.T) {
	tests := []struct {
		name  string
		lb    string
		valid bool
	}{
		{name: "Lowercase letters, digits and dashes are valid", lb: "prod-shop-web-1a2b3c4d", valid: true},
		{name: "One character is valid", lb: "a", valid: true},
		{name: "The official CCM's 32-character default name is valid", lb: "a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4", valid: true},
		{name: "128 characters are valid (Hetzner's limit)", lb: strings.Repeat("a", 128), valid: true},
		{name: "128 multi-byte characters are valid: the limit counts characters", lb: strings.Repeat("ä", 128), valid: true},
		{name: "129 characters are invalid", lb: strings.Repeat("a", 129)},
		{name: "An empty name is invalid", lb: ""},
		{name: "Uppercase, dots and inner spaces are valid, as for Hetzner", lb: "Web.shop 1", valid: true},
		{name: "A leading space is invalid", lb: " web"},
		{name: "A trailing newline is invalid", lb: "web\n"},
		{name: "A leading non-breaking space is invalid", lb: "\u00a0web"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := plugins.ValidateLoadBalancerName(tc.lb)
			if (err == nil) != tc.valid {
				t.Errorf("ValidateLoadBalancerName(%q) = %v, want valid %v", tc.lb, err, tc.valid)
			}
		})
	}
}

package plugins

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

func TestPackUnpack(t *testing.T) {
	for _, c := range []struct{ ptr, size uint32 }{{0, 0}, {16, 21}, {0xffffffff, 0xffffffff}, {1 << 31, 1}} {
		if p, s := unpack(pack(c.ptr, c.size)); p != c.ptr || s != c.size {
			t.Errorf("unpack(pack(%d, %d)) = %d, %d", c.ptr, c.size, p, s)
		}
	}
}

func TestCappedWriter(t *testing.T) {
	var buf bytes.Buffer
	w := &cappedWriter{w: &buf, left: 10}
	for _, s := range []string{"12345", "67890abc", "more"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if want := "1234567890\n[plugin output truncated]\n"; buf.String() != want {
		t.Errorf("output %q, want %q", buf.String(), want)
	}
}

// Independent regexp versions of the rules, to cross-check the hand-written validator.
var (
	nameRE      = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	subdomainRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	reservedRE  = regexp.MustCompile(`(^|\.)(kubernetes|k8s)\.io/`)
	lbNameRE    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

func validKeyRE(k string) bool {
	prefix, name, found := strings.Cut(k, "/")
	if !found {
		return len(k) <= 63 && nameRE.MatchString(k)
	}
	return len(prefix) <= 253 && subdomainRE.MatchString(prefix) && !reservedRE.MatchString(k) &&
		len(name) <= 63 && nameRE.MatchString(name)
}

// FuzzReply decodes arbitrary replies as the host does; it must never panic, and what the
// validator accepts must match the regexp version of the rules.
func FuzzReply(f *testing.F) {
	for _, s := range []string{
		`{"labels":{"example.com/a":"b"}}`, `{"labels":{"kubernetes.io/x":"y"}}`, `{"name":"web-1"}`,
		`{"error":"boom"}`, `{"labels":`, `null`, `{"labels":{"a/b/c":""}}`, `{"name":"-x"}`, `{} {}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var labels NodeLabelsReply
		if decodeStrict(b, &labels) == nil {
			err := ValidateLabels(labels.Labels)
			want := len(labels.Labels) <= MaxLabels
			for k, v := range labels.Labels {
				want = want && validKeyRE(k) && (v == "" || len(v) <= 63 && nameRE.MatchString(v))
			}
			if (err == nil) != want {
				t.Errorf("ValidateLabels(%q) = %v, regexp rules say valid=%v", labels.Labels, err, want)
			}
		}
		var name LoadBalancerNameReply
		if decodeStrict(b, &name) == nil {
			err := ValidateLoadBalancerName(name.Name)
			want := len(name.Name) <= MaxLoadBalancerNameLen && lbNameRE.MatchString(name.Name)
			if (err == nil) != want {
				t.Errorf("ValidateLoadBalancerName(%q) = %v, regexp rules say valid=%v", name.Name, err, want)
			}
		}
	})
}

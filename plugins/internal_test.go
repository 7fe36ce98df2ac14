package plugins

import (
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"
)

func TestPackUnpack(t *testing.T) {
	for _, c := range []struct{ ptr, size uint32 }{{0, 0}, {16, 21}, {0xffffffff, 0xffffffff}, {1 << 31, 1}} {
		if p, s := unpack(pack(c.ptr, c.size)); p != c.ptr || s != c.size {
			t.Errorf("unpack(pack(%d, %d)) = %d, %d", c.ptr, c.size, p, s)
		}
	}
}

func TestOutputBudget(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type write struct {
		at          time.Duration // since t0
		n           int
		wantAllowed int
		wantNote    bool
	}
	tests := []struct {
		name   string
		writes []write
	}{
		{name: "A burst of 16 KiB passes, then output is cut with one note", writes: []write{
			{at: 0, n: 10 << 10, wantAllowed: 10 << 10},
			{at: 0, n: 10 << 10, wantAllowed: 6 << 10, wantNote: true},
			{at: 0, n: 100, wantAllowed: 0},
		}},
		{name: "The budget refills at 1 KiB/s", writes: []write{
			{at: 0, n: 16 << 10, wantAllowed: 16 << 10},
			{at: 0, n: 1, wantAllowed: 0, wantNote: true},
			{at: 2 * time.Second, n: 4 << 10, wantAllowed: 2 << 10},
			{at: 4 * time.Second, n: 1 << 10, wantAllowed: 1 << 10},
			{at: 4 * time.Second, n: 2 << 10, wantAllowed: 1 << 10, wantNote: true},
		}},
		{name: "A tiny write costs 128 bytes, so tiny writes cannot flood the log with records", writes: []write{
			{at: 0, n: (16 << 10) - 256, wantAllowed: (16 << 10) - 256},
			{at: 0, n: 1, wantAllowed: 1},
			{at: 0, n: 1, wantAllowed: 1},
			{at: 0, n: 1, wantAllowed: 0, wantNote: true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &outputBudget{tokens: outputBurstBytes, last: t0}
			for i, w := range tc.writes {
				allowed, note := b.take(w.n, t0.Add(w.at))
				if allowed != w.wantAllowed || note != w.wantNote {
					t.Errorf("write %d of %d bytes at %s = %d, note %v; want %d, note %v", i, w.n, w.at, allowed, note, w.wantAllowed, w.wantNote)
				}
			}
		})
	}
}

// Independent regexp versions of the rules, to cross-check the hand-written validator.
var (
	nameRE      = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	subdomainRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	reservedRE  = regexp.MustCompile(`(^|\.)(kubernetes|k8s)\.io/`)
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
// validator accepts must match the regexp (for names: rune) version of the rules.
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
			runes := []rune(name.Name)
			want := len(runes) > 0 && len(runes) <= MaxLoadBalancerNameLen && !unicode.IsSpace(runes[0]) && !unicode.IsSpace(runes[len(runes)-1])
			if (err == nil) != want {
				t.Errorf("ValidateLoadBalancerName(%q) = %v, regexp rules say valid=%v", name.Name, err, want)
			}
		}
	})
}

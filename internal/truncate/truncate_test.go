package truncate_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/truncate"
)

func TestString(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
	}{
		{"short text is kept", "denied", 1024},
		{"exactly max is kept", strings.Repeat("a", 64), 64},
		{"ascii is cut", strings.Repeat("a", 1<<20), 1024},
		{"multi-byte runes are not split", strings.Repeat("ü€𝄞", 1000), 100},
		{"a tiny max still says what was cut", strings.Repeat("x", 100), 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := truncate.String(tc.in, tc.max)
			if len(tc.in) <= tc.max {
				if got != tc.in {
					t.Fatalf("String() = %q, want the input", got)
				}
				return
			}
			if len(got) > max(tc.max, 32) {
				t.Errorf("len = %d, want <= %d", len(got), max(tc.max, 32))
			}
			if !utf8.ValidString(got) {
				t.Errorf("cut inside a rune: %q", got)
			}
			if !strings.Contains(got, "bytes cut)") {
				t.Errorf("no marker: %q", got)
			}
		})
	}
}

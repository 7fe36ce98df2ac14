// Package truncate shortens text that ends up in events, errors and logs, so that a huge
// policy message or annotation value cannot become a huge Kubernetes event.
package truncate

import (
	"fmt"
	"unicode/utf8"
)

// EventMessage is the longest event message the CCM writes (bytes). core/v1 Events have no hard
// limit, but events.k8s.io caps a note at 1 KiB and kubectl shows no more usefully.
const EventMessage = 1024

// Value is the longest echo of user input (an annotation value) in a message (bytes).
const Value = 256

// String returns s when it has at most limit bytes; otherwise its longest prefix that ends on a
// rune boundary and, with the suffix " …(N bytes cut)", fits in limit bytes. limit below 32 is
// treated as 32.
func String(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	limit = maxInt(limit, 32)
	suffix := fmt.Sprintf(" …(%d bytes cut)", len(s))
	cut := limit - len(suffix)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf(" …(%d bytes cut)", len(s)-cut)
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

package hcloudemu_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

func TestParseSelector_Matches(t *testing.T) {
	labels := map[string]string{"app": "web", "tier": "front", "hcloud-ccm/service-uid": "abc-1", "empty": ""}
	for _, tc := range []struct {
		name     string
		selector string
		want     bool
	}{
		{"The empty selector matches everything", "", true},
		{"Equality with = matches an equal value", "app=web", true},
		{"Equality with == matches an equal value", "app==web", true},
		{"Equality does not match another value", "app=db", false},
		{"A prefixed key works as the CCM sends it", "hcloud-ccm/service-uid=abc-1", true},
		{"Inequality matches another value", "app!=db", true},
		{"Inequality fails on an equal value", "app!=web", false},
		{"Inequality matches an absent key", "missing!=x", true},
		{"Existence matches a present key", "tier", true},
		{"Existence fails on an absent key", "missing", false},
		{"Negated existence matches an absent key", "!missing", true},
		{"Negated existence fails on a present key", "!app", false},
		{"in matches a listed value", "app in (db,web)", true},
		{"in fails on an unlisted value", "app in (db, cache)", false},
		{"in fails on an absent key", "missing in (a)", false},
		{"notin matches an unlisted value", "app notin (db)", true},
		{"notin fails on a listed value", "app notin (db,web)", false},
		{"notin matches an absent key", "missing notin (a)", true},
		{"Commas mean AND: all true", "app=web,tier,!missing", true},
		{"Commas mean AND: one false", "app=web,tier=back", false},
		{"An empty value matches an empty label", "empty=", true},
		{"Spaces around operators are ignored", " app = web , tier in ( front ) ", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := hcloudemu.ParseSelector(tc.selector)
			if err != nil {
				t.Fatalf("ParseSelector(%q): %v", tc.selector, err)
			}
			if got := sel.Matches(labels); got != tc.want {
				t.Errorf("Matches = %v, want %v (parsed %+v)", got, tc.want, sel)
			}
		})
	}
}

func TestParseSelector_Errors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		selector string
	}{
		{"A lone operator is invalid", "="},
		{"A missing key is invalid", "=web"},
		{"A trailing comma is invalid", "app=web,"},
		{"Two values without comma are invalid", "app=web db"},
		{"in without parentheses is invalid", "app in db"},
		{"An unclosed value set is invalid", "app in (db"},
		{"A negated key with a value is invalid", "!app=web"},
		{"A key with invalid characters is invalid", "ap$p=web"},
		{"A value with invalid characters is invalid", "app=we$b"},
		{"A stray parenthesis is invalid", "app)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if sel, err := hcloudemu.ParseSelector(tc.selector); err == nil {
				t.Errorf("ParseSelector(%q) = %+v, want an error", tc.selector, sel)
			}
		})
	}
}

func TestSelector_StringRoundTrips(t *testing.T) {
	in := "a=1,b!=2,c,!d,e in (x,y),f notin (z)"
	sel, err := hcloudemu.ParseSelector(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := sel.String(); got != in {
		t.Errorf("String() = %q, want %q", got, in)
	}
}

// FuzzParseSelector checks the parser never panics and that any accepted
// selector survives a round trip through String.
func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{"", "a=b", "a==b", "a!=b", "a", "!a", "a in (b,c)", "a notin (b)", "x/y=z,!w", "a in ()", "k=,j"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := hcloudemu.ParseSelector(s)
		if err != nil {
			return
		}
		again, err := hcloudemu.ParseSelector(sel.String())
		if err != nil {
			t.Fatalf("re-parse of %q (from %q): %v", sel.String(), s, err)
		}
		if diff := cmp.Diff(sel, again); diff != "" {
			t.Fatalf("round trip of %q changed the selector (-first +second):\n%s", s, diff)
		}
		_ = sel.Matches(map[string]string{"a": "b"})
	})
}

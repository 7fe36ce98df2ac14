package gate

import (
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// TestMessageGroups_String: a message names exactly the steps it was given for, by their full
// labels, never a count of an operation (which would also count steps it was not given for).
func TestMessageGroups_String(t *testing.T) {
	type add struct {
		label string
		msgs  []policy.Message
	}
	port22 := []policy.Message{{Msg: "listen port 22 is not allowed"}}
	tests := []struct {
		name string
		adds []add
		want string
	}{
		{
			name: "A message for one of two add_service steps names only that step",
			adds: []add{{"add_service(22)", port22}, {"add_service(443)", nil}},
			want: "listen port 22 is not allowed: for add_service(22)",
		},
		{
			name: "A message for two steps of one operation names both",
			adds: []add{{"add_target(server:1)", port22}, {"add_target(server:2)", port22}, {"add_target(server:3)", nil}},
			want: "listen port 22 is not allowed: for add_target(server:1), add_target(server:2)",
		},
		{
			name: "Two messages keep their order and their own steps; a code is shown",
			adds: []add{
				{"create(web)", []policy.Message{{Msg: "lb31 is not allowed", Code: "type"}}},
				{"add_service(22)", port22},
			},
			want: "lb31 is not allowed (type): for create(web); listen port 22 is not allowed: for add_service(22)",
		},
		{
			name: "Beyond five steps the rest is counted as steps",
			adds: []add{{"add_target(server:1)", port22}, {"add_target(server:2)", port22}, {"add_target(server:3)", port22},
				{"add_target(server:4)", port22}, {"add_target(server:5)", port22}, {"add_target(server:6)", port22}, {"add_target(server:7)", port22}},
			want: "listen port 22 is not allowed: for add_target(server:1), add_target(server:2), add_target(server:3), add_target(server:4), add_target(server:5) and 2 more steps",
		},
		{
			name: "No message, no text",
			adds: []add{{"add_service(443)", nil}},
			want: "",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var g Messages
			for _, a := range tc.adds {
				g.Add(a.label, a.msgs)
			}
			if got := g.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
			if strings.Contains(g.String(), "×") {
				t.Errorf("String() = %q counts an operation", g.String())
			}
		})
	}
}

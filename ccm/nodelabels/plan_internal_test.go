package nodelabels

import (
	"encoding/json"
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestNewPlan(t *testing.T) {
	const ann = AnnotationPluginLabels
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        map[string]string
		wantPlan    plan
	}{
		{
			name:     "a node without labels gets the plugin labels and owns them",
			want:     map[string]string{"pool": "a", "example.com/tier": "gold"},
			wantPlan: plan{set: map[string]string{"pool": "a", "example.com/tier": "gold"}, owned: "example.com/tier,pool", ownedChanged: true},
		},
		{
			name:        "an owned label gets the new value",
			labels:      map[string]string{"pool": "a"},
			annotations: map[string]string{ann: "pool"},
			want:        map[string]string{"pool": "b"},
			wantPlan:    plan{set: map[string]string{"pool": "b"}, owned: "pool"},
		},
		{
			name:     "a label with the wanted value applied at initialisation is claimed",
			labels:   map[string]string{"pool": "a"},
			want:     map[string]string{"pool": "a"},
			wantPlan: plan{owned: "pool", ownedChanged: true},
		},
		{
			name:     "a label someone else set to another value is a conflict and not owned",
			labels:   map[string]string{"pool": "manual"},
			want:     map[string]string{"pool": "a"},
			wantPlan: plan{conflicts: []string{"pool"}},
		},
		{
			name:        "an owned label the plugin no longer wants is removed and disowned",
			labels:      map[string]string{"pool": "a", "gpu": "yes"},
			annotations: map[string]string{ann: "gpu,pool"},
			want:        map[string]string{"pool": "a"},
			wantPlan:    plan{remove: []string{"gpu"}, owned: "pool", ownedChanged: true},
		},
		{
			name:        "when the plugin wants nothing any more every owned label and the annotation go",
			labels:      map[string]string{"pool": "a", "gpu": "yes", "team": "x"},
			annotations: map[string]string{ann: "gpu,pool"},
			want:        map[string]string{},
			wantPlan:    plan{remove: []string{"gpu", "pool"}, ownedChanged: true},
		},
		{
			name:        "labels not owned are never removed",
			labels:      map[string]string{"team": "x"},
			annotations: map[string]string{ann: "pool"},
			want:        map[string]string{},
			wantPlan:    plan{ownedChanged: true},
		},
		{
			name:        "an owned label someone removed is added again",
			labels:      map[string]string{},
			annotations: map[string]string{ann: "pool"},
			want:        map[string]string{"pool": "a"},
			wantPlan:    plan{set: map[string]string{"pool": "a"}, owned: "pool"},
		},
		{
			name:        "an unchanged node needs no write",
			labels:      map[string]string{"pool": "a", "example.com/tier": "gold", "team": "x"},
			annotations: map[string]string{ann: "example.com/tier,pool"},
			want:        map[string]string{"pool": "a", "example.com/tier": "gold"},
			wantPlan:    plan{owned: "example.com/tier,pool"},
		},
		{
			name:     "nothing wanted and nothing owned needs no write",
			labels:   map[string]string{"team": "x"},
			want:     nil,
			wantPlan: plan{},
		},
		{
			name: "built-in labels and the kubernetes.io and k8s.io namespaces are left to the CCM",
			labels: map[string]string{
				"node.kubernetes.io/instance-type":   "cx22",
				"instance.hetzner.cloud/provided-by": "cloud",
			},
			want: map[string]string{
				"node.kubernetes.io/instance-type":   "cx52",
				"instance.hetzner.cloud/provided-by": "plugin",
				"topology.kubernetes.io/custom":      "x",
				"node-role.kubernetes.io/worker":     "",
				"kubernetes.io/hostname":             "h",
				"sub.k8s.io/x":                       "y",
				"beta.kubernetes.io/instance-type":   "cx52",
				"pool":                               "a",
			},
			wantPlan: plan{set: map[string]string{"pool": "a"}, owned: "pool", ownedChanged: true},
		},
		{
			name:        "an edited annotation cannot make the controller remove a system label",
			labels:      map[string]string{"node-role.kubernetes.io/worker": "", "instance.hetzner.cloud/provided-by": "cloud"},
			annotations: map[string]string{ann: "instance.hetzner.cloud/provided-by,node-role.kubernetes.io/worker"},
			want:        map[string]string{},
			wantPlan:    plan{ownedChanged: true},
		},
		{
			name:        "an annotation out of order or with spaces is rewritten in canonical form",
			labels:      map[string]string{"a": "1", "b": "2"},
			annotations: map[string]string{ann: " b, a ,"},
			want:        map[string]string{"a": "1", "b": "2"},
			wantPlan:    plan{owned: "a,b", ownedChanged: true},
		},
		{
			name:        "an empty annotation is removed",
			annotations: map[string]string{ann: ""},
			want:        map[string]string{},
			wantPlan:    plan{ownedChanged: true},
		},
		{
			name:        "add, change, claim, conflict and remove in one plan",
			labels:      map[string]string{"change": "old", "claim": "same", "conflict": "theirs", "stale": "x"},
			annotations: map[string]string{ann: "change,stale"},
			want:        map[string]string{"add": "new", "change": "new", "claim": "same", "conflict": "ours"},
			wantPlan: plan{
				set:          map[string]string{"add": "new", "change": "new"},
				remove:       []string{"stale"},
				conflicts:    []string{"conflict"},
				owned:        "add,change,claim",
				ownedChanged: true,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			labels, annotations, want := maps.Clone(tc.labels), maps.Clone(tc.annotations), maps.Clone(tc.want)
			got := newPlan(tc.labels, tc.annotations, tc.want)
			opts := []cmp.Option{cmp.AllowUnexported(plan{}), cmpopts.EquateEmpty()}
			if diff := cmp.Diff(tc.wantPlan, got, opts...); diff != "" {
				t.Errorf("plan mismatch (-want +got):\n%s", diff)
			}
			if got.changed() != (len(tc.wantPlan.set) > 0 || len(tc.wantPlan.remove) > 0 || tc.wantPlan.ownedChanged) {
				t.Errorf("changed() = %v for %+v", got.changed(), got)
			}
			// The inputs weren't modified.
			if !maps.Equal(labels, tc.labels) || !maps.Equal(annotations, tc.annotations) || !maps.Equal(want, tc.want) {
				t.Error("newPlan modified its arguments")
			}
		})
	}
}

func TestPlan_patch(t *testing.T) {
	tests := []struct {
		name            string
		plan            plan
		resourceVersion string
		want            string
	}{
		{
			name:            "labels to set and remove and a new annotation, conditional on the resource version",
			plan:            plan{set: map[string]string{"a": "1"}, remove: []string{"b"}, owned: "a", ownedChanged: true},
			resourceVersion: "42",
			want:            `{"metadata":{"annotations":{"node.hcloud-policy-ccm.io/plugin-labels":"a"},"labels":{"a":"1","b":null},"resourceVersion":"42"}}`,
		},
		{
			name: "a claim writes only the annotation",
			plan: plan{owned: "a", ownedChanged: true},
			want: `{"metadata":{"annotations":{"node.hcloud-policy-ccm.io/plugin-labels":"a"}}}`,
		},
		{
			name: "nothing owned any more removes the annotation",
			plan: plan{remove: []string{"a"}, ownedChanged: true},
			want: `{"metadata":{"annotations":{"node.hcloud-policy-ccm.io/plugin-labels":null},"labels":{"a":null}}}`,
		},
		{
			name: "an empty label value is kept, not removed",
			plan: plan{set: map[string]string{"gpu": ""}, owned: "a"},
			want: `{"metadata":{"labels":{"gpu":""}}}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.plan.patch(tc.resourceVersion)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(got) || string(got) != tc.want {
				t.Errorf("patch() = %s, want %s", got, tc.want)
			}
		})
	}
}

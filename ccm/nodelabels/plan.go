package nodelabels

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// AnnotationPluginLabels lists the label keys this controller applied to a node and owns:
// sorted, comma-separated, without spaces. Only keys listed here are ever changed against an
// existing value or removed.
//
// It MUST not change: after a rename the controller would forget which labels it owns, leave
// stale ones behind and report every one of its own labels as a conflict.
const AnnotationPluginLabels = "node.hcloud-policy-ccm.io/plugin-labels"

// builtinLabels are the labels the CCM sets itself (through the upstream node controller);
// plugin output never changes them.
var builtinLabels = map[string]bool{
	"node.kubernetes.io/instance-type":         true,
	"beta.kubernetes.io/instance-type":         true,
	"topology.kubernetes.io/region":            true,
	"topology.kubernetes.io/zone":              true,
	"failure-domain.beta.kubernetes.io/region": true,
	"failure-domain.beta.kubernetes.io/zone":   true,
	"instance.hetzner.cloud/provided-by":       true,
}

// reservedKey matches the keys the upstream node controller drops from AdditionalLabels
// (k8s.io/cloud-provider controllers/node/node_controller.go); we drop the same ones.
var reservedKey = regexp.MustCompile(`(^|\.)(kubernetes|k8s)\.io/`)

// managed reports whether the controller may manage label key k at all: it is neither a
// built-in label nor in the kubernetes.io or k8s.io namespaces.
func managed(k string) bool {
	return !builtinLabels[k] && !strings.HasPrefix(k, "topology.kubernetes.io/") && !reservedKey.MatchString(k)
}

// plan is what one sync changes on a node. The zero plan changes nothing.
type plan struct {
	// set holds labels to add or to change, by key.
	set map[string]string
	// remove holds owned labels that are no longer wanted, sorted.
	remove []string
	// conflicts holds wanted keys already on the node with another value, not owned, sorted.
	conflicts []string
	// owned is the new value of AnnotationPluginLabels; "" removes the annotation.
	owned string
	// ownedChanged is true when the annotation must be written.
	ownedChanged bool
}

// changed reports whether the plan needs a write.
func (p plan) changed() bool {
	return len(p.set) > 0 || len(p.remove) > 0 || p.ownedChanged
}

// newPlan computes the changes that bring a node with the given labels and annotations in line
// with the plugin output want. It does not modify its arguments.
//
// For every key of want the controller may manage (see managed): an absent label is added and
// owned; an owned label gets the wanted value; a label not owned but with the wanted value is
// claimed (it was applied at initialisation from the same plugin); a label not owned with
// another value is left alone and reported as a conflict. Owned labels no longer wanted are
// removed. Keys in the annotation that the controller may not manage are ignored, so an edited
// annotation can never make it remove a label it did not set.
func newPlan(labels, annotations, want map[string]string) plan {
	p := plan{set: map[string]string{}}
	owned := parseOwned(annotations[AnnotationPluginLabels])
	next := map[string]bool{}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if !managed(k) {
			continue
		}
		v := want[k]
		cur, present := labels[k]
		switch {
		case !present, owned[k] && cur != v:
			p.set[k] = v
			next[k] = true
		case owned[k], cur == v:
			next[k] = true
		default:
			p.conflicts = append(p.conflicts, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(owned)) {
		if _, present := labels[k]; present && !next[k] {
			p.remove = append(p.remove, k)
		}
	}
	p.owned = strings.Join(slices.Sorted(maps.Keys(next)), ",")
	cur, present := annotations[AnnotationPluginLabels]
	p.ownedChanged = cur != p.owned || (p.owned == "" && present)
	return p
}

// parseOwned returns the keys listed in an AnnotationPluginLabels value that the controller
// may manage. Blank entries and surrounding spaces are ignored.
func parseOwned(v string) map[string]bool {
	owned := map[string]bool{}
	for k := range strings.SplitSeq(v, ",") {
		if k = strings.TrimSpace(k); k != "" && managed(k) {
			owned[k] = true
		}
	}
	return owned
}

// patch returns the JSON merge patch of p: labels to set, removed labels as null, and the
// annotation (null when nothing is owned any more). A non-empty resourceVersion makes the
// patch conditional, so a plan computed from a stale cache is rejected with a conflict instead
// of overwriting a label someone just set.
func (p plan) patch(resourceVersion string) ([]byte, error) {
	labels := map[string]*string{}
	for k, v := range p.set {
		labels[k] = &v
	}
	for _, k := range p.remove {
		labels[k] = nil
	}
	meta := map[string]any{}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	if p.ownedChanged {
		var owned *string
		if p.owned != "" {
			owned = &p.owned
		}
		meta["annotations"] = map[string]*string{AnnotationPluginLabels: owned}
	}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	b, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return nil, fmt.Errorf("encoding node patch: %w", err)
	}
	return b, nil
}

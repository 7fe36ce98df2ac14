//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// The official deploy/ccm.yaml and deploy/ccm-networks.yaml, as committed in the official
// repository (test/deploy/testdata/official/README.md names the commit).
const (
	officialManifest         = "../deploy/testdata/official/rendered/manifest-ccm.yaml"
	officialNetworksManifest = "../deploy/testdata/official/rendered/manifest-ccm-networks.yaml"
)

// ccmContainer is the container name of the official chart and manifests, and of ours.
const ccmContainer = "hcloud-cloud-controller-manager"

// TestSwapFromOfficialManifest: a cluster runs the official CCM as its deploy/ccm.yaml installs
// it (the official file itself). `kubectl apply -k deploy/`, without --force, patches the
// Deployment in place: same selector (app: hcloud-cloud-controller-manager), one container of
// the same name with our image and args. `kubectl set image` by the official container name
// then works as with the official.
func TestSwapFromOfficialManifest(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	c.ApplyFile(t, officialManifest)
	c.Kubectl(t, "apply", "-k", deployDir)
	d, err := c.Client().AppsV1().Deployments(ccmNamespace).Get(t.Context(), "hcloud-cloud-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := render(t, deployDir).deployment
	if got := d.Spec.Selector.MatchLabels; !equalMaps(got, want.Spec.Selector.MatchLabels) || got["app"] != ccmContainer {
		t.Errorf("selector %v, want ours %v (the official's)", got, want.Spec.Selector.MatchLabels)
	}
	ctrs := d.Spec.Template.Spec.Containers
	if len(ctrs) != 1 || ctrs[0].Name != ccmContainer {
		t.Fatalf("containers %v, want one named %s", containerNames(ctrs), ccmContainer)
	}
	if got := ctrs[0].Args; strings.Join(got, " ") != strings.Join(want.Spec.Template.Spec.Containers[0].Args, " ") {
		t.Errorf("args %v, want ours %v", got, want.Spec.Template.Spec.Containers[0].Args)
	}
	if !strings.HasPrefix(ctrs[0].Image, chartImage+":") {
		t.Errorf("image %s, want ours", ctrs[0].Image)
	}
	c.Kubectl(t, "-n", ccmNamespace, "set", "image", "deployment/hcloud-cloud-controller-manager", ccmContainer+"="+chartImage+":v9.9.9")
	d, err = c.Client().AppsV1().Deployments(ccmNamespace).Get(t.Context(), "hcloud-cloud-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := containerNames(d.Spec.Template.Spec.Containers); len(got) != 1 || d.Spec.Template.Spec.Containers[0].Image != chartImage+":v9.9.9" {
		t.Errorf("after kubectl set image: containers %v, image %s", got, d.Spec.Template.Spec.Containers[0].Image)
	}
}

// swapOverlay writes an operator's kustomize overlay of deploy/networks, as written for the
// official ccm-networks.yaml: a strategic-merge patch of the container by its official name
// (an extra variable) and a JSON patch of args/6 (--cluster-cidr there) to cidr, guarded by a
// test op. It returns the overlay's directory.
func swapOverlay(t *testing.T, cidr string) string {
	t.Helper()
	overlay := t.TempDir()
	abs, err := filepath.Abs(deployDir + "/networks")
	if err != nil {
		t.Fatal(err)
	}
	base, err := filepath.Rel(overlay, abs)
	if err != nil {
		t.Fatal(err)
	}
	k := `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ` + base + `
patches:
  - patch: |-
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: hcloud-cloud-controller-manager
        namespace: kube-system
      spec:
        template:
          spec:
            containers:
              - name: hcloud-cloud-controller-manager
                env:
                  - name: HCLOUD_LOAD_BALANCERS_LOCATION
                    value: fsn1
  - target:
      kind: Deployment
      name: hcloud-cloud-controller-manager
    patch: |-
      - op: test
        path: /spec/template/spec/containers/0/args/6
        value: --cluster-cidr=10.244.0.0/16
      - op: replace
        path: /spec/template/spec/containers/0/args/6
        value: --cluster-cidr=` + cidr + `
`
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k), 0o600); err != nil {
		t.Fatal(err)
	}
	return overlay
}

// TestSwapKustomizeOverlayKeepsOfficialState: the official ccm-networks.yaml (the official file)
// runs over the state the official CCM left (nodes with InternalIPs, a route per node, load
// balancers attached to the network). The operator's overlay, written for the official manifest
// (patch of the container by name, args/6 replaced), is put over deploy/networks and applied
// with plain `kubectl apply -k` (no --force). The stored Deployment has one container with the
// patched --cluster-cidr at args/6 and the extra variable; our CCM, run as it says, takes that
// CIDR, reconciles everything once and then makes no mutating request for swapWindow.
func TestSwapKustomizeOverlayKeepsOfficialState(t *testing.T) {
	t.Parallel()
	e := officialState(t, true, "01-defaults-1port", []string{"05-location"}, nil)
	e.c.ApplyFile(t, officialNetworksManifest)
	nodesBefore, routesBefore := e.nodes(t), e.routes(t)
	e.emu.ResetRequests()

	const cidr = "10.244.0.0/15" // widened; holds every node's pod CIDR
	e.c.Kubectl(t, "apply", "-k", swapOverlay(t, cidr))
	e.c.Kubectl(t, "delete", "clusterrolebinding", "--ignore-not-found", "system:hcloud-cloud-controller-manager:restricted")
	d := e.deployment(t)
	ctrs := d.Spec.Template.Spec.Containers
	if len(ctrs) != 1 || ctrs[0].Name != ccmContainer || ctrs[0].Image == "" {
		t.Fatalf("containers %v after the overlay, want one named %s with an image", containerNames(ctrs), ccmContainer)
	}
	args := ctrs[0].Args
	if len(args) < 7 || args[6] != "--cluster-cidr="+cidr || slices.Contains(args, "--cluster-cidr=10.244.0.0/16") {
		t.Fatalf("args %v: want --cluster-cidr=%s at index 6 and no other --cluster-cidr", args, cidr)
	}
	if env := envByName(ctrs[0].Env, "HCLOUD_LOAD_BALANCERS_LOCATION"); env == nil || env.Value != "fsn1" {
		t.Errorf("HCLOUD_LOAD_BALANCERS_LOCATION = %+v, want fsn1 from the overlay", env)
	}
	e.startOurs(t, "ccm")
	waitCCM(t, e.ccm, time.Minute, func() (bool, error) {
		want := `FLAG: --cluster-cidr="` + cidr + `"`
		return strings.Contains(e.ccm.Logs(), want), fmt.Errorf("%s has not logged %s", e.ccm.Name, want)
	})
	e.checkQuiet(t, nodesBefore, routesBefore)
}

func containerNames(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

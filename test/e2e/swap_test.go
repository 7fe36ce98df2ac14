//go:build e2e

package e2e

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// TestSwapFromOfficialManifest: a cluster runs the official CCM as its deploy/ccm.yaml installs
// it (Deployment hcloud-cloud-controller-manager in kube-system with the official selector, which
// is immutable). `kubectl apply -k deploy/` alone fails on the selector; the documented command,
// `kubectl apply -k deploy/ --force`, replaces the Deployment (delete and create where a patch
// is invalid) in one step, and the ServiceAccount and the Secret reference stay.
func TestSwapFromOfficialManifest(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	official := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "hcloud-cloud-controller-manager", Namespace: ccmNamespace},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "hcloud-cloud-controller-manager"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "hcloud-cloud-controller-manager"}},
				Spec: corev1.PodSpec{
					ServiceAccountName: "hcloud-cloud-controller-manager",
					Containers: []corev1.Container{{
						Name: "hcloud-cloud-controller-manager", Image: "docker.io/hetznercloud/hcloud-cloud-controller-manager:v1.35.0",
						Args: []string{"--allow-untagged-cloud", "--cloud-provider=hcloud", "--leader-elect=false"},
					}},
				},
			},
		},
	}
	if _, err := c.Client().AppsV1().Deployments(ccmNamespace).Create(t.Context(), official, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := c.KubectlErr(t, "apply", "-k", deployDir); err == nil || !strings.Contains(out, "field is immutable") {
		t.Fatalf("kubectl apply -k deploy/ over the official Deployment: err %v, output %s; want the immutable selector refused (else the documented --force is not needed)", err, out)
	}
	c.Kubectl(t, "apply", "-k", deployDir, "--force")
	d, err := c.Client().AppsV1().Deployments(ccmNamespace).Get(t.Context(), "hcloud-cloud-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := render(t, deployDir).deployment
	if got := d.Spec.Selector.MatchLabels; !equalMaps(got, want.Spec.Selector.MatchLabels) {
		t.Errorf("selector %v, want ours %v", got, want.Spec.Selector.MatchLabels)
	}
	if got := d.Spec.Template.Spec.Containers[0].Args; strings.Join(got, " ") != strings.Join(want.Spec.Template.Spec.Containers[0].Args, " ") {
		t.Errorf("args %v, want ours %v", got, want.Spec.Template.Spec.Containers[0].Args)
	}
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

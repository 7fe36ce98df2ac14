package harness

import "time"

// kubectlTimeout bounds one kubectl call.
const kubectlTimeout = 2 * time.Minute

// Kubectl runs the built kubectl with the admin kubeconfig and returns its combined output,
// failing the test (with the output) if it exits non-zero.
func (c *Cluster) Kubectl(t T, args ...string) string {
	t.Helper()
	out, err := run(kubectlTimeout, Bin(t, "kubectl"), append([]string{"--kubeconfig=" + c.Kubeconfig}, args...)...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return out
}

// KubectlErr runs kubectl like Kubectl but returns its failure instead of failing the test, for
// tests that expect kubectl to refuse something.
func (c *Cluster) KubectlErr(t T, args ...string) (string, error) {
	t.Helper()
	return run(kubectlTimeout, Bin(t, "kubectl"), append([]string{"--kubeconfig=" + c.Kubeconfig}, args...)...)
}

// Kustomize renders the kustomization in dir with the built kubectl (`kubectl kustomize dir`,
// the embedded kustomize with its default load restrictions) and returns the YAML. It needs no
// cluster.
func Kustomize(t T, dir string) string {
	t.Helper()
	out, err := run(kubectlTimeout, Bin(t, "kubectl"), "kustomize", dir)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return out
}

// ApplyKustomize applies the kustomization in dir exactly as an operator would
// (`kubectl apply -k dir`), as the cluster admin, and returns kubectl's output.
//
// Everything in the output is applied, the Deployment included: the apiserver validates it like
// any other object, and since no kube-controller-manager or kubelet runs it stays an inert
// object (no ReplicaSet, no Pod). Tests run the CCM binary themselves, with the
// ServiceAccount's kubeconfig (ServiceAccountKubeconfig), so the applied RBAC is what they
// exercise.
func (c *Cluster) ApplyKustomize(t T, dir string) string {
	t.Helper()
	return c.Kubectl(t, "apply", "-k", dir)
}

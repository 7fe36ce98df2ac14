//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// rendered is the output of `kubectl kustomize` (or `helm template`), split by kind.
type rendered struct {
	kinds        []string          // "Kind/namespace/name", in output order
	docs         map[string]string // "Kind/namespace/name" -> its YAML
	deployment   *appsv1.Deployment
	configMaps   map[string]*corev1.ConfigMap
	clusterRoles map[string]*rbacv1.ClusterRole
}

func render(t testing.TB, dir string) rendered {
	t.Helper()
	return parseManifests(t, "kubectl kustomize "+dir, harness.Kustomize(t, dir))
}

// parseManifests splits the multi-document YAML out (made by what) into a rendered.
func parseManifests(t testing.TB, what, out string) rendered {
	t.Helper()
	r := rendered{docs: map[string]string{}, configMaps: map[string]*corev1.ConfigMap{}, clusterRoles: map[string]*rbacv1.ClusterRole{}}
	for _, doc := range strings.Split("\n"+out, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("parse the output of %s: %v\n%s", what, err, doc)
		}
		if meta.Kind == "" { // a document of comments only
			continue
		}
		key := meta.Kind + "/" + meta.Metadata.Namespace + "/" + meta.Metadata.Name
		r.kinds = append(r.kinds, key)
		r.docs[key] = doc
		var target any
		switch meta.Kind {
		case "Deployment":
			r.deployment = &appsv1.Deployment{}
			target = r.deployment
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			r.configMaps[meta.Metadata.Name] = cm
			target = cm
		case "ClusterRole":
			cr := &rbacv1.ClusterRole{}
			r.clusterRoles[meta.Metadata.Name] = cr
			target = cr
		default:
			continue
		}
		if err := yaml.UnmarshalStrict([]byte(doc), target); err != nil {
			t.Fatalf("parse %s %s: %v", meta.Kind, meta.Metadata.Name, err)
		}
	}
	return r
}

// TestDeployRenders checks that `kubectl kustomize deploy/` (plain, default load restrictions)
// renders the objects an operator expects, with the hardening the Deployment promises.
func TestDeployRenders(t *testing.T) {
	t.Parallel()
	r := render(t, deployDir)
	wantKinds := []string{
		"ServiceAccount/kube-system/hcloud-cloud-controller-manager",
		"Role/kube-system/hcloud-policy-ccm",
		"ClusterRole//system:hcloud-policy-ccm",
		"ClusterRole//system:hcloud-policy-ccm:metrics-reader",
		"RoleBinding/kube-system/hcloud-policy-ccm",
		"RoleBinding/kube-system/hcloud-policy-ccm:extension-apiserver-authentication-reader",
		"ClusterRoleBinding//system:hcloud-policy-ccm",
		"ConfigMap/kube-system/hcloud-ccm-policies",
		"Deployment/kube-system/hcloud-cloud-controller-manager",
	}
	if diff := cmp.Diff(wantKinds, r.kinds); diff != "" {
		t.Errorf("objects of kubectl kustomize %s (-want +got):\n%s", deployDir, diff)
	}
	if _, ok := r.configMaps[policyConfigMap]; !ok {
		t.Errorf("no ConfigMap %s (without a hash suffix: the CCM watches it by name)", policyConfigMap)
	}
	for _, rule := range r.clusterRoles["system:hcloud-policy-ccm"].Rules {
		for _, v := range rule.Verbs {
			if v == "*" {
				t.Errorf("ClusterRole rule %+v grants every verb", rule)
			}
		}
	}

	wantReader := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
	if cr := r.clusterRoles["system:hcloud-policy-ccm:metrics-reader"]; cr == nil || !cmp.Equal(wantReader, cr.Rules) {
		t.Errorf("ClusterRole system:hcloud-policy-ccm:metrics-reader = %+v, want only get on /metrics", cr)
	}
	checkMetricsOnlyAuthorized(t, r)

	d := r.deployment
	if d == nil {
		t.Fatal("no Deployment rendered")
	}
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != ccmServiceAccount {
		t.Errorf("serviceAccountName = %q, want %q", pod.ServiceAccountName, ccmServiceAccount)
	}
	if pod.HostNetwork {
		t.Error("the base Deployment uses hostNetwork; only deploy/networks should")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	for _, arg := range []string{
		"--cloud-provider=hcloud", "--allow-untagged-cloud", "--leader-elect=true",
		"--policy-configmap=kube-system/hcloud-ccm-policies", "--policy-mode=dryrun", officialFeatureGate,
	} {
		if !slices.Contains(ctr.Args, arg) {
			t.Errorf("container args %v lack %s", ctr.Args, arg)
		}
	}
	sc := ctr.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !cmp.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext = %+v, want read-only root, no privilege escalation, drop ALL", sc)
	}
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser != 65532 || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext = %+v, want non-root 65532 and seccomp RuntimeDefault", psc)
	}
	for _, p := range []*corev1.Probe{ctr.LivenessProbe, ctr.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.IntValue() != 10258 || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			t.Errorf("probe = %+v, want HTTPS GET /healthz on 10258", p)
		}
	}
	if env := envByName(ctr.Env, "HCLOUD_TOKEN"); env == nil || env.ValueFrom == nil || env.ValueFrom.SecretKeyRef == nil ||
		env.ValueFrom.SecretKeyRef.Name != "hcloud" || env.ValueFrom.SecretKeyRef.Key != "token" {
		t.Errorf("HCLOUD_TOKEN = %+v, want Secret hcloud key token", env)
	}
	// As the official deploy/ccm.yaml: the Secret's `network` key is not read (it would turn on
	// network mode: attached-network check, load balancers attached, private IPs in the status).
	if env := envByName(ctr.Env, "HCLOUD_NETWORK"); env != nil {
		t.Errorf("HCLOUD_NETWORK = %+v, want none: only deploy/networks reads the Secret's network key", env)
	}
	var plugins *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == "plugins" {
			plugins = &pod.Volumes[i]
		}
	}
	if plugins == nil || plugins.ConfigMap == nil || plugins.ConfigMap.Name != "hcloud-ccm-plugins" ||
		plugins.ConfigMap.Optional == nil || !*plugins.ConfigMap.Optional {
		t.Errorf("plugins volume = %+v, want optional ConfigMap hcloud-ccm-plugins", plugins)
	}
	wantTolerations := []string{
		"node.cloudprovider.kubernetes.io/uninitialized", "CriticalAddonsOnly",
		"node-role.kubernetes.io/master", "node-role.kubernetes.io/control-plane", "node.kubernetes.io/not-ready",
	}
	var gotTolerations []string
	for _, tol := range pod.Tolerations {
		gotTolerations = append(gotTolerations, tol.Key)
	}
	if diff := cmp.Diff(wantTolerations, gotTolerations); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}
}

// TestDeployNetworksRenders checks the private-network variant: hostNetwork, pod CIDR
// allocation, and a required HCLOUD_NETWORK.
func TestDeployNetworksRenders(t *testing.T) {
	t.Parallel()
	r := render(t, deployDir+"/networks")
	d := r.deployment
	if d == nil {
		t.Fatal("no Deployment rendered")
	}
	pod := d.Spec.Template.Spec
	if !pod.HostNetwork {
		t.Error("hostNetwork is off, want on")
	}
	ctr := pod.Containers[0]
	for _, arg := range []string{"--allocate-node-cidrs=true", "--cluster-cidr=10.244.0.0/16", "--cloud-provider=hcloud", officialFeatureGate, "--policy-mode=dryrun"} {
		if !slices.Contains(ctr.Args, arg) {
			t.Errorf("container args %v lack %s", ctr.Args, arg)
		}
	}
	if env := envByName(ctr.Env, "HCLOUD_NETWORK"); env == nil || env.ValueFrom == nil || env.ValueFrom.SecretKeyRef == nil ||
		env.ValueFrom.SecretKeyRef.Key != "network" || (env.ValueFrom.SecretKeyRef.Optional != nil && *env.ValueFrom.SecretKeyRef.Optional) {
		t.Errorf("HCLOUD_NETWORK = %+v, want required Secret hcloud key network", env)
	}
	// Under hostNetwork an unauthenticated metrics server would listen on the node's interfaces.
	checkMetricsOnlyAuthorized(t, r)
}

// officialFeatureGate is the feature gate the official chart and both official manifests pass.
const officialFeatureGate = "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true"

// enforceOverlay writes a kustomization in a new temporary directory that builds on the
// kustomization dir (deploy/ or deploy/networks/) with the component deploy/enforce, as the
// component's header tells an operator to, and returns the directory. kustomize takes only
// relative paths, so dir and the component are referred to relative to it.
func enforceOverlay(t *testing.T, dir string) string {
	t.Helper()
	overlay := t.TempDir()
	rel := func(path string) string {
		abs, err := filepath.Abs(path)
		if err != nil {
			t.Fatal(err)
		}
		r, err := filepath.Rel(overlay, abs)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + rel(dir) +
		"\ncomponents:\n  - " + rel(deployDir+"/enforce") + "\n"
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k), 0o600); err != nil {
		t.Fatal(err)
	}
	return overlay
}

// TestDeployEnforceComponent: the component deploy/enforce turns the dry run of deploy/ and
// deploy/networks/ into enforce and changes nothing else (the args are the same plus a last
// --policy-mode=enforce, which the CCM takes over the earlier dryrun; every other object is
// identical).
func TestDeployEnforceComponent(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{deployDir, deployDir + "/networks"} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			plain, enforced := render(t, dir), render(t, enforceOverlay(t, dir))
			want := slices.Clone(plain.deployment.Spec.Template.Spec.Containers[0].Args)
			if !slices.Contains(want, "--policy-mode=dryrun") {
				t.Fatalf("%s args %v lack --policy-mode=dryrun", dir, want)
			}
			want = append(want, "--policy-mode=enforce")
			if diff := cmp.Diff(want, enforced.deployment.Spec.Template.Spec.Containers[0].Args); diff != "" {
				t.Errorf("args with deploy/enforce (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(plain.kinds, enforced.kinds); diff != "" {
				t.Errorf("objects with deploy/enforce (-plain +enforced):\n%s", diff)
			}
			for _, key := range plain.kinds {
				if strings.HasPrefix(key, "Deployment/") {
					continue
				}
				if plain.docs[key] != enforced.docs[key] {
					t.Errorf("%s changed by deploy/enforce:\n%s\nvs\n%s", key, plain.docs[key], enforced.docs[key])
				}
			}
		})
	}
}

// checkMetricsOnlyAuthorized checks that a rendered Deployment serves metrics only on the secure
// port (authorized by the cluster): the official CCM's unauthenticated metrics server is off, no
// container port for it, and /metrics is not among the paths the secure port allows to anyone.
func checkMetricsOnlyAuthorized(t *testing.T, r rendered) {
	t.Helper()
	if r.deployment == nil {
		t.Fatal("no Deployment rendered")
	}
	ctr := r.deployment.Spec.Template.Spec.Containers[0]
	if env := envByName(ctr.Env, "HCLOUD_METRICS_ENABLED"); env == nil || env.Value != "false" || env.ValueFrom != nil {
		t.Errorf("HCLOUD_METRICS_ENABLED = %+v, want \"false\": the extra metrics server has no authentication", env)
	}
	for _, p := range ctr.Ports {
		if p.ContainerPort == 8233 {
			t.Errorf("container port %+v exposes the unauthenticated metrics server", p)
		}
	}
	for _, arg := range ctr.Args {
		if strings.HasPrefix(arg, "--authorization-always-allow-paths") && strings.Contains(arg, "/metrics") {
			t.Errorf("arg %s lets anyone read /metrics on the secure port", arg)
		}
	}
}

func envByName(env []corev1.EnvVar, name string) *corev1.EnvVar {
	for i := range env {
		if env[i].Name == name {
			return &env[i]
		}
	}
	return nil
}

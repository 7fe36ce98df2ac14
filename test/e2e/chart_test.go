//go:build e2e

package e2e

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// The Helm chart and the values files `make chart-test` uses, relative to this package.
const (
	chartDir          = "../../deploy/chart"
	chartRelease      = "hccm"
	officialDefaults  = chartDir + "/ci/official-default-values.yaml"
	officialDaemonSet = chartDir + "/ci/official-full-daemonset-values.yaml"
	policyValues      = chartDir + "/ci/policy-values.yaml"
	chartImage        = "ghcr.io/policy-ccm/hcloud-policy-ccm"
)

// renderChart is `helm template hccm deploy/chart --namespace kube-system` with the values files
// and extra flags, parsed.
func renderChart(t *testing.T, valuesFiles []string, extra ...string) rendered {
	t.Helper()
	args := []string{"template", chartRelease, chartDir, "--namespace", ccmNamespace}
	for _, f := range valuesFiles {
		args = append(args, "--values", f)
	}
	args = append(args, extra...)
	return parseManifests(t, "helm "+strings.Join(args, " "), harness.Helm(t, args...))
}

// decode parses the rendered object key ("Kind/namespace/name") into obj, failing if it is
// missing.
func (r rendered) decode(t *testing.T, key string, obj any) {
	t.Helper()
	doc, ok := r.docs[key]
	if !ok {
		t.Fatalf("%s not rendered; rendered: %v", key, r.kinds)
	}
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		t.Fatalf("parse %s: %v", key, err)
	}
}

// TestChartOfficialDefaults renders the chart with the official chart's default values file,
// unchanged, and compares the CCM's Deployment with deploy/ccm.yaml's (rendered from the same
// chart with deploy/values.yaml): the same args (but --leader-elect=false for one replica, as
// the official chart renders, where deploy/values.yaml sets leaderElect: true), the same token, hardening and probes, this CCM's image instead of the official
// one, and the official selector labels (so `helm upgrade` from the official release keeps the
// immutable selector).
func TestChartOfficialDefaults(t *testing.T) {
	t.Parallel()
	harness.Helm(t, "lint", "--strict", chartDir, "--namespace", ccmNamespace, "--values", officialDefaults)
	base := render(t, deployDir).deployment
	r := renderChart(t, []string{officialDefaults})
	wantKinds := []string{
		"ServiceAccount/kube-system/hcloud-cloud-controller-manager",
		"ConfigMap/kube-system/hcloud-ccm-policies",
		"ClusterRole//system:hcloud-policy-ccm",
		"ClusterRole//system:hcloud-policy-ccm:metrics-reader",
		"ClusterRoleBinding//system:hcloud-policy-ccm",
		"Role/kube-system/hcloud-policy-ccm",
		"RoleBinding/kube-system/hcloud-policy-ccm",
		"RoleBinding/kube-system/hcloud-policy-ccm:extension-apiserver-authentication-reader",
		"Deployment/kube-system/hcloud-cloud-controller-manager",
	}
	if diff := cmp.Diff(wantKinds, r.kinds); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	d := r.deployment
	if d == nil {
		t.Fatal("no Deployment rendered")
	}
	if *d.Spec.Replicas != 1 {
		t.Errorf("replicas = %d, want 1", *d.Spec.Replicas)
	}
	wantSelector := map[string]string{"app.kubernetes.io/name": "hcloud-cloud-controller-manager", "app.kubernetes.io/instance": chartRelease}
	if diff := cmp.Diff(wantSelector, d.Spec.Selector.MatchLabels); diff != "" {
		t.Errorf("selector (-want +got):\n%s", diff)
	}
	pod, basePod := d.Spec.Template.Spec, base.Spec.Template.Spec
	ctr, baseCtr := pod.Containers[0], basePod.Containers[0]

	wantArgs := slices.DeleteFunc(slices.Clone(baseCtr.Args), func(a string) bool { return a == "--leader-elect=true" })
	wantArgs = append(wantArgs, "--leader-elect=false")
	// Swap-safe: the example policies in dry run, as in deploy/; the official feature gate.
	for _, arg := range []string{"--policy-mode=dryrun", officialFeatureGate} {
		if !slices.Contains(ctr.Args, arg) {
			t.Errorf("args %v lack %s", ctr.Args, arg)
		}
	}
	slices.Sort(wantArgs)
	gotArgs := slices.Sorted(slices.Values(ctr.Args))
	if diff := cmp.Diff(wantArgs, gotArgs); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(ctr.Image, chartImage+":") {
		t.Errorf("image = %q, want %s (the official image of the values file replaced)", ctr.Image, chartImage)
	}
	if diff := cmp.Diff(envByName(baseCtr.Env, "HCLOUD_TOKEN"), envByName(ctr.Env, "HCLOUD_TOKEN")); diff != "" {
		t.Errorf("HCLOUD_TOKEN (-kustomize +chart):\n%s", diff)
	}
	if env := envByName(ctr.Env, "HCLOUD_NETWORK"); env != nil {
		t.Errorf("HCLOUD_NETWORK = %+v without networking.enabled, want none (as the official chart)", env)
	}
	for _, cmpPair := range []struct {
		name      string
		base, got any
	}{
		{"pod securityContext", basePod.SecurityContext, pod.SecurityContext},
		{"container securityContext", baseCtr.SecurityContext, ctr.SecurityContext},
		{"livenessProbe", baseCtr.LivenessProbe, ctr.LivenessProbe},
		{"readinessProbe", baseCtr.ReadinessProbe, ctr.ReadinessProbe},
		{"serviceAccountName", basePod.ServiceAccountName, pod.ServiceAccountName},
		{"priorityClassName", basePod.PriorityClassName, pod.PriorityClassName},
		{"dnsPolicy", basePod.DNSPolicy, pod.DNSPolicy},
		{"plugins volume", basePod.Volumes, pod.Volumes},
		{"volumeMounts", baseCtr.VolumeMounts, ctr.VolumeMounts},
	} {
		if diff := cmp.Diff(cmpPair.base, cmpPair.got); diff != "" {
			t.Errorf("%s (-kustomize +chart):\n%s", cmpPair.name, diff)
		}
	}
	if pod.HostNetwork {
		t.Error("hostNetwork without networking.enabled")
	}
	// The policy ConfigMap holds the example policies, like deploy/'s.
	cm, baseCM := r.configMaps[policyConfigMap], render(t, deployDir).configMaps[policyConfigMap]
	if cm == nil || baseCM == nil {
		t.Fatalf("policy ConfigMap: chart %v, kustomize %v", cm != nil, baseCM != nil)
	}
	if diff := cmp.Diff(baseCM.Data, cm.Data); diff != "" {
		t.Errorf("policy ConfigMap data (-kustomize +chart):\n%s", diff)
	}
}

// TestChartLeaseWhereTheOfficialKeepsIt: installed outside kube-system, the chart keeps the
// leader-election Lease where the official chart's CCM takes it, kube-system/cloud-controller-manager
// (no --leader-elect-resource-namespace), and grants it there with a Role of its own, while the
// policy ConfigMap's Role stays in the release namespace. args.leader-elect-resource-namespace
// and -name move the Lease rules with the Lease.
func TestChartLeaseWhereTheOfficialKeepsIt(t *testing.T) {
	t.Parallel()
	leaseRules := func(name string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{name}, Verbs: []string{"get", "update"}},
		}
	}
	configMapRule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{policyConfigMap}, Verbs: []string{"get", "list", "watch"}}
	tests := []struct {
		name                     string
		set                      []string
		leaseNamespace, lease    string
		wantArgsWithLeaseOptions []string
	}{
		{name: "defaults", leaseNamespace: "kube-system", lease: "cloud-controller-manager"},
		{
			name:           "args move the Lease",
			set:            []string{"--set", "args.leader-elect-resource-namespace=ccm-leases", "--set", "args.leader-elect-resource-name=ccm"},
			leaseNamespace: "ccm-leases", lease: "ccm",
			wantArgsWithLeaseOptions: []string{"--leader-elect-resource-name=ccm", "--leader-elect-resource-namespace=ccm-leases"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"template", chartRelease, chartDir, "--namespace", "hcloud-system", "--values", officialDefaults, "--set", "replicaCount=2"}, tc.set...)
			r := parseManifests(t, "helm "+strings.Join(args, " "), harness.Helm(t, args...))
			got := slices.DeleteFunc(slices.Clone(r.deployment.Spec.Template.Spec.Containers[0].Args), func(a string) bool {
				return !strings.HasPrefix(a, "--leader-elect-resource")
			})
			if diff := cmp.Diff(tc.wantArgsWithLeaseOptions, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("--leader-elect-resource-* args (-want +got):\n%s", diff)
			}
			var own, election rbacv1.Role
			r.decode(t, "Role/hcloud-system/hcloud-policy-ccm", &own)
			if diff := cmp.Diff([]rbacv1.PolicyRule{configMapRule}, own.Rules); diff != "" {
				t.Errorf("Role in the release namespace (-want +got):\n%s", diff)
			}
			r.decode(t, "Role/"+tc.leaseNamespace+"/hcloud-policy-ccm:leader-election", &election)
			if diff := cmp.Diff(leaseRules(tc.lease), election.Rules); diff != "" {
				t.Errorf("Role of the Lease (-want +got):\n%s", diff)
			}
			var binding rbacv1.RoleBinding
			r.decode(t, "RoleBinding/"+tc.leaseNamespace+"/hcloud-policy-ccm:leader-election", &binding)
			wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: ccmServiceAccount, Namespace: "hcloud-system"}}
			if binding.RoleRef.Name != "hcloud-policy-ccm:leader-election" || !cmp.Equal(wantSubjects, binding.Subjects) {
				t.Errorf("RoleBinding of the Lease: roleRef %+v, subjects %+v; want the Role for %v", binding.RoleRef, binding.Subjects, wantSubjects)
			}
		})
	}
}

// TestChartOfficialFullDaemonSet renders the chart with an official-style values file that sets
// every optional key of the official chart, and checks each lands where the official chart puts
// it: a DaemonSet with leader election on, private networking, extra tolerations, node selector
// (and, as the official DaemonSet, no affinity), pod labels and annotations, the token from a file of an extra volume, the PodMonitor
// (when its CRD exists) and the NetworkPolicy.
func TestChartOfficialFullDaemonSet(t *testing.T) {
	t.Parallel()
	harness.Helm(t, "lint", "--strict", chartDir, "--namespace", ccmNamespace, "--values", officialDaemonSet)
	r := renderChart(t, []string{officialDaemonSet}, "--api-versions", "monitoring.coreos.com/v1/PodMonitor")
	if r.deployment != nil {
		t.Error("a Deployment was rendered with kind: DaemonSet")
	}
	var ds appsv1.DaemonSet
	r.decode(t, "DaemonSet/kube-system/hcloud-cloud-controller-manager", &ds)
	pod := ds.Spec.Template.Spec
	ctr := pod.Containers[0]
	for _, arg := range []string{"--allocate-node-cidrs=true", "--cluster-cidr=10.42.0.0/16", "--cloud-provider=hcloud", "--allow-untagged-cloud"} {
		if !slices.Contains(ctr.Args, arg) {
			t.Errorf("args %v lack %s", ctr.Args, arg)
		}
	}
	if slices.ContainsFunc(ctr.Args, func(a string) bool { return strings.HasPrefix(a, "--leader-elect") }) {
		t.Errorf("args %v set --leader-elect; a DaemonSet keeps the default (on)", ctr.Args)
	}
	if !pod.HostNetwork {
		t.Error("hostNetwork off with networking.enabled")
	}
	if env := envByName(ctr.Env, "HCLOUD_NETWORK"); env == nil || env.ValueFrom == nil || env.ValueFrom.SecretKeyRef == nil ||
		env.ValueFrom.SecretKeyRef.Key != "network" {
		t.Errorf("HCLOUD_NETWORK = %+v, want Secret hcloud key network", env)
	}
	if env := envByName(ctr.Env, "HCLOUD_TOKEN"); env != nil {
		t.Errorf("HCLOUD_TOKEN = %+v, want none (null in the values)", env)
	}
	if env := envByName(ctr.Env, "HCLOUD_TOKEN_FILE"); env == nil || env.Value != "/var/run/secrets/hcloud/token" {
		t.Errorf("HCLOUD_TOKEN_FILE = %+v", env)
	}
	if !slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool { return tol.Key == "dedicated" }) {
		t.Errorf("tolerations %v lack the additional one", pod.Tolerations)
	}
	if _, ok := pod.NodeSelector["node-role.kubernetes.io/control-plane"]; !ok || len(pod.NodeSelector) != 1 {
		t.Errorf("nodeSelector = %v", pod.NodeSelector)
	}
	// As the official chart's DaemonSet: no affinity, dnsPolicy Default, system-cluster-critical,
	// whatever the values say (docs/reference/differences.md, "Install and swap").
	if pod.Affinity != nil || pod.DNSPolicy != corev1.DNSDefault || pod.PriorityClassName != "system-cluster-critical" {
		t.Errorf("affinity = %+v, dnsPolicy %q, priorityClassName %q; want none, Default, system-cluster-critical", pod.Affinity, pod.DNSPolicy, pod.PriorityClassName)
	}
	if ds.Spec.Template.Labels["team"] != "platform" || ds.Spec.Template.Annotations["example.com/rollout"] != "2026-11" {
		t.Errorf("pod labels %v, annotations %v", ds.Spec.Template.Labels, ds.Spec.Template.Annotations)
	}
	if !slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "hcloud-token" }) ||
		!slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "hcloud-token" && v.Secret != nil }) {
		t.Errorf("extra volume and mount missing: volumes %v, mounts %v", pod.Volumes, ctr.VolumeMounts)
	}
	if len(pod.ImagePullSecrets) != 1 || pod.ImagePullSecrets[0].Name != "registry-credentials" {
		t.Errorf("imagePullSecrets = %v", pod.ImagePullSecrets)
	}
	if _, ok := r.docs["PodMonitor/kube-system/hcloud-cloud-controller-manager"]; !ok {
		t.Errorf("no PodMonitor with its CRD available; rendered %v", r.kinds)
	}
	var np networkingv1.NetworkPolicy
	r.decode(t, "NetworkPolicy/kube-system/hcloud-cloud-controller-manager", &np)
	if len(np.Spec.Egress) != 1 || len(np.Spec.Ingress) != 1 {
		t.Errorf("NetworkPolicy egress %v, ingress %v; want allow-all egress and the one ingress rule", np.Spec.Egress, np.Spec.Ingress)
	}
	var sa corev1.ServiceAccount
	r.decode(t, "ServiceAccount/kube-system/hcloud-cloud-controller-manager", &sa)
	if sa.Annotations["example.com/owner"] != "platform-team" {
		t.Errorf("ServiceAccount annotations = %v", sa.Annotations)
	}

	// Without the PodMonitor CRD, no PodMonitor (helm would fail to install it).
	if _, ok := renderChart(t, []string{officialDaemonSet}).docs["PodMonitor/kube-system/hcloud-cloud-controller-manager"]; ok {
		t.Error("PodMonitor rendered although the cluster has no PodMonitor CRD")
	}
}

// TestChartPolicyAndPlugins renders the official defaults plus this chart's own values
// (policy.*, plugins.*) and checks the flags, the ConfigMap from files and the plugin volume.
func TestChartPolicyAndPlugins(t *testing.T) {
	t.Parallel()
	harness.Helm(t, "lint", "--strict", chartDir, "--namespace", ccmNamespace, "--values", officialDefaults, "--values", policyValues)
	r := renderChart(t, []string{officialDefaults, policyValues})
	d := r.deployment
	if d == nil {
		t.Fatal("no Deployment rendered")
	}
	ctr := d.Spec.Template.Spec.Containers[0]
	for _, arg := range []string{
		"--policy-configmap=kube-system/cluster-policies", "--policy-mode=dryrun", "--policy-failure-mode=open",
		"--plugin-node-labels=/plugins/labels.wasm.gz", "--plugin-load-balancer-name=/plugins/lb-name.wasm.gz",
		"--plugin-timeout=250ms", "--node-label-resync=10m", "--plugins-optional=true",
	} {
		if !slices.Contains(ctr.Args, arg) {
			t.Errorf("args %v lack %s", ctr.Args, arg)
		}
	}
	if slices.ContainsFunc(ctr.Args, func(a string) bool { return strings.HasPrefix(a, "--leader-elect") }) {
		t.Errorf("args %v set --leader-elect with 2 replicas; want the default (on)", ctr.Args)
	}
	if ctr.Image != chartImage+":v0.1.0" {
		t.Errorf("image = %q, want %s:v0.1.0", ctr.Image, chartImage)
	}
	cm := r.configMaps["cluster-policies"]
	if cm == nil {
		t.Fatalf("no ConfigMap cluster-policies; rendered %v", r.kinds)
	}
	if got := slices.Sorted(maps.Keys(cm.Data)); !slices.Equal(got, []string{"data.json", "locations.rego"}) {
		t.Errorf("ConfigMap files = %v, want data.json, locations.rego", got)
	}
	var plugins *corev1.Volume
	for i, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "plugins" {
			plugins = &d.Spec.Template.Spec.Volumes[i]
		}
	}
	if plugins == nil || plugins.Image == nil || plugins.Image.Reference != "registry.example.com/ccm-plugins:v1" {
		t.Errorf("plugins volume = %+v, want the OCI image volume", plugins)
	}

	// An existing ConfigMap: the chart renders none and only points the CCM at it.
	r = renderChart(t, []string{officialDefaults}, "--set", "policy.configMap.create=false", "--set", "policy.configMap.name=mine")
	if len(r.configMaps) != 0 {
		t.Errorf("ConfigMaps rendered with policy.configMap.create=false: %v", r.kinds)
	}
	if !slices.Contains(r.deployment.Spec.Template.Spec.Containers[0].Args, "--policy-configmap=kube-system/mine") {
		t.Errorf("args %v lack --policy-configmap=kube-system/mine", r.deployment.Spec.Template.Spec.Containers[0].Args)
	}
}

// TestChartLoadBalancerClass: loadBalancerClass.name and .only render --load-balancer-class
// and --load-balancer-class-only=true; by default neither flag is rendered (issue 43).
func TestChartLoadBalancerClass(t *testing.T) {
	t.Parallel()
	has := func(args []string, prefix string) bool {
		return slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, prefix) })
	}
	r := renderChart(t, []string{officialDefaults})
	if args := r.deployment.Spec.Template.Spec.Containers[0].Args; has(args, "--load-balancer-class") {
		t.Errorf("default values render %v; want no --load-balancer-class flag", args)
	}
	r = renderChart(t, []string{officialDefaults}, "--set", "loadBalancerClass.name=example.com/hetzner", "--set", "loadBalancerClass.only=true")
	args := r.deployment.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--load-balancer-class=example.com/hetzner", "--load-balancer-class-only=true"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
}

// TestChartRefusesWhatItCannotHonour: values this CCM cannot run with fail the render with a
// message naming the value and the fix.
func TestChartRefusesWhatItCannotHonour(t *testing.T) {
	t.Parallel()
	tests := []struct {
		set, want string
	}{
		{"robot.enabled=true,networking.enabled=true", "robot.enabled with networking.enabled: Robot and routes exclude each other"},
		{"kind=StatefulSet", `kind: "StatefulSet" is not supported; set it to Deployment or DaemonSet`},
		{"policy.mode=audit", `policy.mode: "audit" is not supported; set it to enforce or dryrun`},
		{"policy.failureMode=maybe", `policy.failureMode: "maybe" is not supported; set it to closed or open`},
		{"args.policy-mode=dryrun", "args.policy-mode: the chart sets --policy-mode; use policy.mode instead"},
		{"args.leader-elect=true,leaderElect=true", "args.leader-elect and leaderElect are both set; keep one"},
		{"leaderElect=yes", `leaderElect: "yes" is not supported; set it to true, false or null`},
		{"plugins.nodeLabels=/plugins/x.wasm", `plugins.nodeLabels: "/plugins/x.wasm" is a path; give the file name under /plugins`},
		{"plugins.volume.emptyDir.medium=Memory,plugins.initContainer.image=p:v1,plugins.initContainer.command={cp}", "plugins.volume and plugins.initContainer are both set"},
		{"plugins.initContainer.image=p:v1", "plugins.initContainer needs image and command"},
		{"loadBalancerClass.only=true", "loadBalancerClass.only without loadBalancerClass.name"},
		{"args.load-balancer-class=x", "args.load-balancer-class: the chart sets --load-balancer-class; use loadBalancerClass.name instead"},
	}
	for _, tc := range tests {
		t.Run(tc.set, func(t *testing.T) {
			_, err := harness.RunHelm(t, "template", chartRelease, chartDir, "--namespace", ccmNamespace,
				"--values", officialDefaults, "--set", tc.set)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template --set %s: %v, want an error containing %q", tc.set, err, tc.want)
			}
		})
	}
}

// TestChartPluginsInitContainer: plugins.initContainer renders an init container that copies
// the modules from its image into the plugins volume, an emptyDir, mounted at /plugins in both.
func TestChartPluginsInitContainer(t *testing.T) {
	t.Parallel()
	r := renderChart(t, []string{officialDefaults}, "--set", "plugins.initContainer.image=registry.example.com/ccm-plugins:v1",
		"--set", "plugins.initContainer.command={cp,/modules/plugin.wasm,/plugins/}", "--set", "plugins.nodeLabels=plugin.wasm")
	spec := r.deployment.Spec.Template.Spec
	if len(spec.InitContainers) != 1 {
		t.Fatalf("init containers = %+v, want copy-plugins", spec.InitContainers)
	}
	ic := spec.InitContainers[0]
	if ic.Name != "copy-plugins" || ic.Image != "registry.example.com/ccm-plugins:v1" ||
		!slices.Equal(ic.Command, []string{"cp", "/modules/plugin.wasm", "/plugins/"}) ||
		len(ic.VolumeMounts) != 1 || ic.VolumeMounts[0].Name != "plugins" || ic.VolumeMounts[0].MountPath != "/plugins" {
		t.Errorf("init container = %+v", ic)
	}
	for _, v := range spec.Volumes {
		if v.Name == "plugins" && v.EmptyDir == nil {
			t.Errorf("plugins volume = %+v, want an emptyDir", v)
		}
	}
	if !slices.Contains(spec.Containers[0].Args, "--plugin-node-labels=/plugins/plugin.wasm") {
		t.Errorf("args %v lack --plugin-node-labels=/plugins/plugin.wasm", spec.Containers[0].Args)
	}
	if d := renderChart(t, []string{officialDefaults}); len(d.deployment.Spec.Template.Spec.InitContainers) != 0 {
		t.Errorf("the defaults render init containers: %+v", d.deployment.Spec.Template.Spec.InitContainers)
	}
}

// TestChartLeaderElect: leaderElect null (the default) renders --leader-elect as the official
// chart (false for a one-replica Deployment, else none: the CCM's default, on); true or false
// render that flag whatever the kind and replicas (deploy/values.yaml sets true).
func TestChartLeaderElect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		set  []string
		want []string // the --leader-elect args
	}{
		{name: "default one replica", want: []string{"--leader-elect=false"}},
		{name: "default two replicas", set: []string{"replicaCount=2"}},
		{name: "default DaemonSet", set: []string{"kind=DaemonSet"}},
		{name: "true one replica", set: []string{"leaderElect=true"}, want: []string{"--leader-elect=true"}},
		{name: "true DaemonSet", set: []string{"leaderElect=true", "kind=DaemonSet"}, want: []string{"--leader-elect=true"}},
		{name: "false two replicas", set: []string{"leaderElect=false", "replicaCount=2"}, want: []string{"--leader-elect=false"}},
		// args.leader-elect as the official chart renders it: in args, then its one-replica false.
		{name: "args one replica", set: []string{"args.leader-elect=true"}, want: []string{"--leader-elect=true", "--leader-elect=false"}},
		{name: "args DaemonSet", set: []string{"args.leader-elect=true", "kind=DaemonSet"}, want: []string{"--leader-elect=true"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var extra []string
			for _, s := range tc.set {
				extra = append(extra, "--set", s)
			}
			r := renderChart(t, []string{officialDefaults}, extra...)
			var spec corev1.PodSpec
			switch {
			case r.deployment != nil:
				spec = r.deployment.Spec.Template.Spec
			default:
				var ds appsv1.DaemonSet
				r.decode(t, "DaemonSet/"+ccmNamespace+"/"+ccmServiceAccount, &ds)
				spec = ds.Spec.Template.Spec
			}
			got := slices.DeleteFunc(slices.Clone(spec.Containers[0].Args), func(a string) bool {
				return !strings.HasPrefix(a, "--leader-elect=")
			})
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("--leader-elect args (-want +got):\n%s", diff)
			}
		})
	}
}

// TestChartInstallRunsCCM installs the rendered chart once, as an operator swapping from the
// official chart would (`helm template` with the official default values, applied to a real
// kube-apiserver, which validates every object), and runs the CCM with the chart's Deployment
// args as the chart's ServiceAccount: it initialises a node, loads the chart's policy ConfigMap
// and is never refused by the apiserver (startCCM fails the test on "is forbidden").
func TestChartInstallRunsCCM(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	manifest := filepath.Join(t.TempDir(), "chart.yaml")
	args := []string{"template", chartRelease, chartDir, "--namespace", ccmNamespace, "--values", officialDefaults}
	out := harness.Helm(t, args...)
	if err := os.WriteFile(manifest, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl apply -f <helm %s>:\n%s", strings.Join(args, " "), c.ApplyFile(t, manifest))
	d := parseManifests(t, "helm template", out).deployment

	emu, endpoint := hcloudemu.NewTestServer(t)
	id := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-1", Type: "cx22", Location: "fsn1"})
	c.CreateNode(t, "worker-1", "10.244.1.0/24")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{deployment: d})
	node := waitInitialised(t, c, ccm, "worker-1", id)
	if got := node.Labels[corev1.LabelInstanceTypeStable]; got != "cx22" {
		t.Errorf("label %s = %q, want cx22", corev1.LabelInstanceTypeStable, got)
	}
	waitEvent(t, c, ccm, ccmNamespace, policyConfigMap, corev1.EventTypeNormal, "PolicyLoaded", "loaded")
}

package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// paritySets is where the value sets and the official chart's renders live (testdata/official/README.md).
const paritySets = "test/deploy/testdata/official"

// differencesDoc is the page every allowed difference cites.
const differencesDoc = "docs/reference/differences.md"

// difference is one field in which the render of deploy/chart differs from the official's.
type difference struct {
	object   string // Kind/name, or "RBAC"
	field    string
	official string // "" when the official has none
	ours     string
}

func (d difference) String() string {
	return fmt.Sprintf("%s %s: official %q, ours %q", d.object, d.field, d.official, d.ours)
}

// allowed is a difference TestRenderParity accepts: its field, a substring that each value must
// contain (empty: any; none: the value must be empty), and the heading of the section of
// differences.md that gives the reason.
type allowed struct {
	field, official, ours string
	section               string
}

// none, as allowed.official or allowed.ours, matches only a missing value.
const none = "<none>"

func (a allowed) matches(d difference) bool {
	contains := func(value, want string) bool {
		if want == none {
			return value == ""
		}
		return strings.Contains(value, want)
	}
	return d.field == a.field && contains(d.official, a.official) && contains(d.ours, a.ours)
}

// installSection is the section of differences.md with the install differences.
const installSection = "Install and swap"

// parityAllowlist is every difference the render comparison accepts; each cites its reason.
var parityAllowlist = []allowed{
	// This CCM's image, not the official one (it implements the gate and the plugins).
	{field: "image", official: "hetznercloud/hcloud-cloud-controller-manager", ours: "ghcr.io/policy-ccm/hcloud-policy-ccm", section: installSection},
	// The official DaemonSet names its binary in command; this image's entrypoint is the CCM.
	{field: "command", official: "/bin/hcloud-cloud-controller-manager", ours: none, section: installSection},
	// This chart's own flags, after every flag of the official.
	{field: "args after the official's", ours: "--policy-configmap=", section: installSection},
	// args.X=false: --X=false, not a bare --X (which turns a boolean flag on).
	{field: "args[4]", official: "--use-service-account-credentials", ours: "--use-service-account-credentials=false", section: installSection},
	// deploy/: leader election on with one replica, safe to scale.
	{field: "args[5]", official: "--leader-elect=false", ours: "--leader-elect=true", section: installSection},
	{field: "args[7]", official: "--leader-elect=false", ours: "--leader-elect=true", section: installSection},
	// deploy/: metrics only on the authenticated secure port.
	{field: "env HCLOUD_METRICS_ENABLED", official: none, ours: `"false"`, section: installSection},
	{field: "port metrics", official: "8233", ours: none, section: installSection},
	// The secure port and its HTTPS /healthz probes (hardening).
	{field: "port https", official: none, ours: "10258", section: installSection},
	{field: "livenessProbe", official: none, ours: "/healthz", section: installSection},
	{field: "readinessProbe", official: none, ours: "/healthz", section: installSection},
	// The plugin volume (optional ConfigMap, mounted read-only at /plugins).
	{field: "volume plugins", official: none, ours: "hcloud-ccm-plugins", section: installSection},
	{field: "volumeMount plugins", official: none, ours: "/plugins", section: installSection},
	// The policy ConfigMap the chart ships (the example policies, in dry run).
	{field: "object", official: none, ours: "ConfigMap/kube-system/hcloud-ccm-policies", section: installSection},
	// Least-privilege RBAC instead of the official ClusterRole.
	{field: "RBAC /nodes", official: "*@cluster", ours: "delete,get,list,patch,update,watch@cluster", section: installSection},
	{field: "RBAC /configmaps", official: "get,list,watch@cluster", ours: "get,list,watch@kube-system[hcloud-ccm-policies]", section: installSection},
	{field: "RBAC events.k8s.io/events", official: none, ours: "create,patch,update@cluster", section: installSection},
	{field: "RBAC /services", official: "list,watch@cluster", ours: "get,list,watch@cluster", section: installSection},
	{field: "RBAC /namespaces", official: none, ours: "get,list,watch@cluster", section: installSection},
	{field: "RBAC /serviceaccounts", official: "create@cluster", ours: none, section: installSection},
	{field: "RBAC coordination.k8s.io/leases", official: "create,get,list,update,watch@cluster", section: installSection},
	{field: "RBAC authentication.k8s.io/tokenreviews", official: none, ours: "create@cluster", section: installSection},
	{field: "RBAC authorization.k8s.io/subjectaccessreviews", official: none, ours: "create@cluster", section: installSection},
	{field: "RBAC role extension-apiserver-authentication-reader", official: none, ours: "bound@kube-system", section: installSection},
	// The policy audit writes its results as PolicyReports (inert without their CRDs).
	{field: "RBAC wgpolicyk8s.io/policyreports", official: none, ours: "create,delete,get,list,update@cluster", section: "Policy audit"},
	{field: "RBAC wgpolicyk8s.io/clusterpolicyreports", official: none, ours: "create,delete,get,list,update@cluster", section: "Policy audit"},
}

// TestRenderParity renders deploy/chart with every value set of testdata/official/values and
// compares it, object by object, with the official chart's render of the same values
// (testdata/official/rendered); deploy/ccm.yaml and deploy/networks/ccm-networks.yaml are compared
// with the official deploy/ccm.yaml and deploy/ccm-networks.yaml. Compared: the objects (kind,
// namespace, name), the workload's selector, replicas, strategy, pod labels, annotations and
// scheduling, container names, image, command, args (order included), env, ports, volumes and
// mounts, probes, resources and security contexts, the ServiceAccount, the PodMonitor, and the
// RBAC rules (verbs per resource and scope, whichever objects carry them). It fails on any
// difference not in parityAllowlist, on an allowlist entry that no set needs, and on an entry
// whose section is not a heading of docs/reference/differences.md.
func TestRenderParity(t *testing.T) {
	root, helm := setup(t)
	headings := docHeadings(t, filepath.Join(root, differencesDoc))
	for _, a := range parityAllowlist {
		if !headings[a.section] {
			t.Errorf("allowlist entry %q cites section %q, which is no heading of %s", a.field, a.section, differencesDoc)
		}
	}
	dir := filepath.Join(root, paritySets)
	sets, err := filepath.Glob(filepath.Join(dir, "values", "*.yaml"))
	if err != nil || len(sets) < 12 {
		t.Fatalf("value sets in %s: %d (%v), want at least 12", dir, len(sets), err)
	}
	used := map[int]bool{}
	check := func(name string, official, ours []byte) {
		diffs := compareRenders(t, name, official, ours)
		for _, d := range diffs {
			i := slices.IndexFunc(parityAllowlist, func(a allowed) bool { return a.matches(d) })
			if i < 0 {
				t.Errorf("%s: %s (not in parityAllowlist: behave as the official, or document it in %s and allow it)", name, d, differencesDoc)
				continue
			}
			used[i] = true
		}
		t.Logf("%s: %d differences, all allowed: %v", name, len(diffs), diffs)
	}
	for _, values := range sets {
		name := strings.TrimSuffix(filepath.Base(values), ".yaml")
		official, err := os.ReadFile(filepath.Join(dir, "rendered", name+".yaml"))
		if err != nil {
			t.Fatalf("%v: run testdata/official/render.sh", err)
		}
		ours, err := Helm(t.Context(), helm, root, "template", "hccm", chartDir, "--namespace", namespace,
			"--api-versions", "monitoring.coreos.com/v1/PodMonitor", "--values", values)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		check(name, official, ours)
	}
	for name, path := range map[string]string{"manifest-ccm": "deploy/ccm.yaml", "manifest-ccm-networks": "deploy/networks/ccm-networks.yaml"} {
		official, err := os.ReadFile(filepath.Join(dir, "rendered", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		ours, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		check(name, official, ours)
	}
	for i, a := range parityAllowlist {
		if !used[i] && !t.Failed() {
			t.Errorf("allowlist entry %+v matches no difference: remove it (and its row in %s if nothing else needs it)", a, differencesDoc)
		}
	}
}

// docHeadings returns the headings of the markdown file at path, without their hashes.
func docHeadings(t *testing.T, path string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "#") {
			out[strings.TrimSpace(strings.TrimLeft(line, "#"))] = true
		}
	}
	return out
}

// render is one parsed helm render: its documents by Kind/namespace/name.
type render map[string][]byte

func parseRender(t *testing.T, what string, out []byte) render {
	t.Helper()
	r := render{}
	for _, doc := range bytes.Split(out, []byte("\n---")) {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s: parse a document: %v\n%s", what, err, doc)
		}
		if meta.Kind == "" {
			continue
		}
		r[meta.Kind+"/"+meta.Metadata.Namespace+"/"+meta.Metadata.Name] = doc
	}
	return r
}

// rbacKinds are compared by their rules (rbacRules), not by name.
var rbacKinds = []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}

// compareRenders returns the differences between the official render and ours.
func compareRenders(t *testing.T, name string, officialOut, oursOut []byte) []difference {
	t.Helper()
	official, ours := parseRender(t, name+" official", officialOut), parseRender(t, name+" ours", oursOut)
	var diffs []difference
	for _, key := range slices.Sorted(maps.Keys(union(official, ours))) {
		kind := strings.SplitN(key, "/", 2)[0]
		if slices.Contains(rbacKinds, kind) {
			continue
		}
		o, inOfficial := official[key]
		u, inOurs := ours[key]
		switch {
		case !inOfficial:
			diffs = append(diffs, difference{object: key, field: "object", ours: key})
		case !inOurs:
			diffs = append(diffs, difference{object: key, field: "object", official: key})
		case kind == "Deployment" || kind == "DaemonSet":
			diffs = append(diffs, compareWorkloads(t, key, o, u)...)
		case kind == "ServiceAccount":
			diffs = append(diffs, compareFields(key, decodeAs[corev1.ServiceAccount](t, o).Annotations, decodeAs[corev1.ServiceAccount](t, u).Annotations, "annotations")...)
		default: // PodMonitor and anything else: the whole object
			diffs = append(diffs, compareFields(key, generic(t, o), generic(t, u), "object")...)
		}
	}
	return append(diffs, compareRBAC(t, official, ours)...)
}

func union(a, b render) render {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

func decodeAs[T any](t *testing.T, doc []byte) T {
	t.Helper()
	var v T
	if err := yaml.Unmarshal(doc, &v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, doc)
	}
	return v
}

func generic(t *testing.T, doc []byte) map[string]any {
	t.Helper()
	m := decodeAs[map[string]any](t, doc)
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "labels") // this chart labels its objects; the official labels none
		if pm, ok := m["kind"].(string); ok && pm == "PodMonitor" {
			meta["labels"] = nil
		}
	}
	return m
}

// workload is what is compared of a Deployment or DaemonSet.
type workload struct {
	replicas, strategy, revisionHistoryLimit any
	selector                                 map[string]string
	template                                 corev1.PodTemplateSpec
}

func decodeWorkload(t *testing.T, key string, doc []byte) workload {
	t.Helper()
	if strings.HasPrefix(key, "DaemonSet/") {
		d := decodeAs[appsv1.DaemonSet](t, doc)
		return workload{nil, nil, d.Spec.RevisionHistoryLimit, d.Spec.Selector.MatchLabels, d.Spec.Template}
	}
	d := decodeAs[appsv1.Deployment](t, doc)
	return workload{d.Spec.Replicas, d.Spec.Strategy, d.Spec.RevisionHistoryLimit, d.Spec.Selector.MatchLabels, d.Spec.Template}
}

func compareWorkloads(t *testing.T, key string, officialDoc, oursDoc []byte) []difference {
	t.Helper()
	o, u := decodeWorkload(t, key, officialDoc), decodeWorkload(t, key, oursDoc)
	op, up := o.template.Spec, u.template.Spec
	var diffs []difference
	add := func(field string, official, ours any) {
		diffs = append(diffs, compareFields(key, official, ours, field)...)
	}
	add("replicas", o.replicas, u.replicas)
	add("strategy", o.strategy, u.strategy)
	add("revisionHistoryLimit", o.revisionHistoryLimit, u.revisionHistoryLimit)
	add("selector", o.selector, u.selector)
	add("pod labels", o.template.Labels, u.template.Labels)
	add("pod annotations", o.template.Annotations, u.template.Annotations)
	add("serviceAccountName", op.ServiceAccountName, up.ServiceAccountName)
	add("imagePullSecrets", op.ImagePullSecrets, up.ImagePullSecrets)
	add("pod securityContext", op.SecurityContext, up.SecurityContext)
	add("priorityClassName", op.PriorityClassName, up.PriorityClassName)
	add("dnsPolicy", op.DNSPolicy, up.DNSPolicy)
	add("dnsConfig", op.DNSConfig, up.DNSConfig)
	add("hostNetwork", op.HostNetwork, up.HostNetwork)
	add("tolerations", op.Tolerations, up.Tolerations)
	add("nodeSelector", op.NodeSelector, up.NodeSelector)
	add("affinity", op.Affinity, up.Affinity)
	add("containers", containerNames(op.Containers), containerNames(up.Containers))
	if len(op.Containers) != 1 || len(up.Containers) != 1 {
		return diffs
	}
	oc, uc := op.Containers[0], up.Containers[0]
	add("image", oc.Image, uc.Image)
	officialArgs := oc.Args
	if len(oc.Command) > 0 { // the official DaemonSet: command = binary + flags
		add("command", oc.Command[0], strings.Join(uc.Command, " "))
		officialArgs = oc.Command[1:]
	} else {
		add("command", oc.Command, uc.Command)
	}
	diffs = append(diffs, compareArgs(key, officialArgs, uc.Args)...)
	diffs = append(diffs, compareNamed(key, "env", oc.Env, uc.Env, func(e corev1.EnvVar) string { return e.Name })...)
	add("env order", envNames(oc.Env, uc.Env), envNames(uc.Env, oc.Env))
	diffs = append(diffs, compareNamed(key, "port", oc.Ports, uc.Ports, func(p corev1.ContainerPort) string { return p.Name })...)
	diffs = append(diffs, compareNamed(key, "volume", op.Volumes, up.Volumes, func(v corev1.Volume) string { return v.Name })...)
	diffs = append(diffs, compareNamed(key, "volumeMount", oc.VolumeMounts, uc.VolumeMounts, func(m corev1.VolumeMount) string { return m.Name })...)
	add("livenessProbe", oc.LivenessProbe, uc.LivenessProbe)
	add("readinessProbe", oc.ReadinessProbe, uc.ReadinessProbe)
	add("startupProbe", oc.StartupProbe, uc.StartupProbe)
	add("resources", oc.Resources, uc.Resources)
	add("container securityContext", oc.SecurityContext, uc.SecurityContext)
	return diffs
}

func containerNames(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// envNames are the names of env that other has too, in env's order.
func envNames(env, other []corev1.EnvVar) []string {
	var out []string
	for _, e := range env {
		if slices.ContainsFunc(other, func(o corev1.EnvVar) bool { return o.Name == e.Name }) {
			out = append(out, e.Name)
		}
	}
	return out
}

// compareArgs: the official flags must be ours at the same index; ours after them must be this
// chart's own flags (one difference lists them).
func compareArgs(key string, official, ours []string) []difference {
	var diffs []difference
	for i, o := range official {
		u := ""
		if i < len(ours) {
			u = ours[i]
		}
		if o != u {
			diffs = append(diffs, difference{object: key, field: fmt.Sprintf("args[%d]", i), official: o, ours: u})
		}
	}
	if len(ours) > len(official) {
		extra := ours[len(official):]
		own := []string{"--policy-", "--plugin-", "--plugins-optional", "--node-label-resync"}
		for _, a := range extra {
			if !slices.ContainsFunc(own, func(p string) bool { return strings.HasPrefix(a, p) }) {
				diffs = append(diffs, difference{object: key, field: "args after the official's: not this chart's own flag", ours: a})
			}
		}
		diffs = append(diffs, difference{object: key, field: "args after the official's", ours: strings.Join(extra, " ")})
	}
	return diffs
}

// compareNamed compares two lists element by element, matched by name.
func compareNamed[T any](key, field string, official, ours []T, name func(T) string) []difference {
	byName := func(list []T) map[string]T {
		m := map[string]T{}
		for _, v := range list {
			m[name(v)] = v
		}
		return m
	}
	o, u := byName(official), byName(ours)
	var diffs []difference
	for _, n := range slices.Sorted(maps.Keys(union2(o, u))) {
		ov, inO := o[n]
		uv, inU := u[n]
		var os, us any
		if inO {
			os = ov
		}
		if inU {
			us = uv
		}
		diffs = append(diffs, compareFields(key, os, us, field+" "+n)...)
	}
	return diffs
}

func union2[T any](a, b map[string]T) map[string]T {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// compareFields is one difference when official and ours marshal differently (nil and empty
// are the same).
func compareFields(key string, official, ours any, field string) []difference {
	o, u := marshal(official), marshal(ours)
	if o == u {
		return nil
	}
	return []difference{{object: key, field: field, official: o, ours: u}}
}

func marshal(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	s := strings.TrimSpace(string(b))
	switch s {
	case "null", "{}", "[]", `""`, "false", "0":
		return ""
	}
	return s
}

// compareRBAC compares the permissions the rendered RBAC objects grant the CCM's ServiceAccount:
// verbs per resource (or non-resource URL), with their scope ("cluster", or the namespace and the
// resource names).
func compareRBAC(t *testing.T, official, ours render) []difference {
	t.Helper()
	o, u := rbacRules(t, official), rbacRules(t, ours)
	var diffs []difference
	for _, res := range slices.Sorted(maps.Keys(union2(o, u))) {
		diffs = append(diffs, compareFields("RBAC", strings.Join(o[res], " "), strings.Join(u[res], " "), "RBAC "+res)...)
	}
	return diffs
}

// rbacRules maps "group/resource" (or "nonResourceURL <url>") to its sorted grants
// "verbs@scope". A role that is bound but not rendered (one of the cluster's, such as
// extension-apiserver-authentication-reader) appears as "role <name>": "bound@<namespace>".
func rbacRules(t *testing.T, r render) map[string][]string {
	t.Helper()
	roles := map[string][]rbacv1.PolicyRule{} // "ClusterRole/name" or "Role/ns/name"
	for key, doc := range r {
		switch {
		case strings.HasPrefix(key, "ClusterRole/"):
			cr := decodeAs[rbacv1.ClusterRole](t, doc)
			roles["ClusterRole/"+cr.Name] = cr.Rules
		case strings.HasPrefix(key, "Role/"):
			role := decodeAs[rbacv1.Role](t, doc)
			roles["Role/"+role.Namespace+"/"+role.Name] = role.Rules
		}
	}
	out := map[string][]string{}
	grant := func(res, g string) {
		if !slices.Contains(out[res], g) {
			out[res] = append(out[res], g)
			slices.Sort(out[res])
		}
	}
	for key, doc := range r {
		var scope, roleKey string
		switch {
		case strings.HasPrefix(key, "ClusterRoleBinding/"):
			b := decodeAs[rbacv1.ClusterRoleBinding](t, doc)
			scope, roleKey = "cluster", "ClusterRole/"+b.RoleRef.Name
		case strings.HasPrefix(key, "RoleBinding/"):
			b := decodeAs[rbacv1.RoleBinding](t, doc)
			scope = b.Namespace
			roleKey = "ClusterRole/" + b.RoleRef.Name
			if b.RoleRef.Kind == "Role" {
				roleKey = "Role/" + b.Namespace + "/" + b.RoleRef.Name
			}
		default:
			continue
		}
		rules, ok := roles[roleKey]
		if !ok {
			grant("role "+strings.TrimPrefix(strings.TrimPrefix(roleKey, "Role/"+scope+"/"), "ClusterRole/"), "bound@"+scope)
			continue
		}
		for _, rule := range rules {
			verbs := strings.Join(slices.Sorted(slices.Values(rule.Verbs)), ",")
			s := scope
			if len(rule.ResourceNames) > 0 {
				s += "[" + strings.Join(rule.ResourceNames, ",") + "]"
			}
			for _, url := range rule.NonResourceURLs {
				grant("nonResourceURL "+url, verbs+"@"+s)
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					grant(g+"/"+res, verbs+"@"+s)
				}
			}
		}
	}
	return out
}

// TestCompareArgs: the official flags must be ours at the same index; after them only this
// chart's own flags may follow.
func TestCompareArgs(t *testing.T) {
	official := []string{"--a", "--cluster-cidr=10.244.0.0/16", "--leader-elect=false"}
	tests := []struct {
		name string
		ours []string
		want []string // fields of the differences
	}{
		{name: "same", ours: official},
		{name: "own flags after", ours: append(slices.Clone(official), "--policy-mode=dryrun"), want: []string{"args after the official's"}},
		{name: "own flag before the official's", ours: []string{"--a", "--policy-mode=dryrun", "--cluster-cidr=10.244.0.0/16", "--leader-elect=false"},
			want: []string{"args[1]", "args[2]", "args after the official's: not this chart's own flag", "args after the official's"}},
		{name: "a foreign flag after", ours: append(slices.Clone(official), "--v=2"),
			want: []string{"args after the official's: not this chart's own flag", "args after the official's"}},
		{name: "one missing", ours: official[:2], want: []string{"args[2]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, d := range compareArgs("Deployment/x", official, tc.ours) {
				got = append(got, d.field)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("differences %v, want %v", got, tc.want)
			}
		})
	}
}

// TestChartKubeVersions: helm installs the chart on Kubernetes 1.33 to 1.37 (the official CCM's
// four minors and the newest) and refuses 1.32 naming kubeVersion.
func TestChartKubeVersions(t *testing.T) {
	root, helm := setup(t)
	for _, tc := range []struct {
		version string
		ok      bool
	}{
		{"v1.32.9", false}, {"v1.33.0", true}, {"v1.34.4", true}, {"v1.35.4", true}, {"v1.36.3", true}, {"v1.37.2", true},
	} {
		_, err := Helm(t.Context(), helm, root, "template", "hccm", chartDir, "--namespace", namespace, "--kube-version", tc.version)
		switch {
		case tc.ok && err != nil:
			t.Errorf("Kubernetes %s: %v, want the chart to render", tc.version, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "kubeVersion")):
			t.Errorf("Kubernetes %s: %v, want a refusal naming kubeVersion", tc.version, err)
		}
	}
}

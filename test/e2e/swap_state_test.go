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

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/golden"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// swapWindow is how long the swapped-in CCM must stay quiet towards the Hetzner API after it has
// reconciled every Service, node and route once: two minutes, in which the route controller
// (--route-reconciliation-period=30s in officialObjects) runs four more rounds.
const swapWindow = 2 * time.Minute

// swapNamespace is the unlabelled namespace of the ingress controller's Service: the example
// policies deny a public load balancer there.
const swapNamespace = "ingress-nginx"

// swapNode is a node of the golden seed (test/golden/official-ccm/seed.yaml) as the official CCM
// initialised it.
type swapNode struct {
	name, podCIDR, ipv4, privateIP string
	id                             int64
	typ, region, zone              string
}

var swapNodes = []swapNode{
	{name: "node-1", podCIDR: "10.244.1.0/24", ipv4: "203.0.113.11", privateIP: "10.0.0.11", id: 101, typ: "cx22", region: "fsn1", zone: "fsn1-dc14"},
	{name: "node-2", podCIDR: "10.244.2.0/24", ipv4: "203.0.113.12", privateIP: "10.0.0.12", id: 102, typ: "cx22", region: "nbg1", zone: "nbg1-dc3"},
	{name: "node-3", podCIDR: "10.244.3.0/24", ipv4: "203.0.113.13", privateIP: "10.0.0.13", id: 103, typ: "cx32", region: "hel1", zone: "hel1-dc2"},
}

// swapEnv is the cluster state the official CCM left behind, and our CCM once swapped in.
type swapEnv struct {
	c       *harness.Cluster
	emu     *hcloudemu.Emulator
	api     golden.API
	network bool // the official ran with HCLOUD_NETWORK (ccm-networks.yaml, networking.enabled)
	cases   []adoptionCase
	ingress adoptionCase // the case whose Service is in swapNamespace
	ccm     *harness.Process
}

// officialState builds what the official CCM leaves behind in a cluster: the golden seed's
// servers (and network k8s) in the emulator; the nodes initialised by the official (provider ID,
// its labels, its addresses: Hostname, ExternalIP and, with network, InternalIP; no taint);
// with network, one route per pod CIDR via the node's private IP and NetworkUnavailable=False
// (RouteCreated) on every node; the load balancers of the recorded cases made by the official
// CCM's own recorded requests (so they carry its labels, hcloud-ccm/service-uid), the first in
// the unlabelled namespace ingress-nginx and the others in default; and the Secret hcloud with
// the keys token and network (many Secrets carry network; the plain variant must ignore it).
func officialState(t *testing.T, network bool, ingressCase string, otherCases []string, annotate map[string]string) *swapEnv {
	t.Helper()
	root := golden.Root(filepath.Join("..", ".."))
	seed, err := hcloudemu.LoadSeedFile(filepath.Join(root, "seed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e := &swapEnv{c: harness.Start(t), network: network}
	var endpoint string
	e.emu, endpoint = hcloudemu.NewTestServer(t, hcloudemu.WithSeed(seed))
	e.api = golden.API{T: t, Endpoint: endpoint, Token: e.emu.Token()}
	ctx := t.Context()
	admin := e.c.Client()

	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: swapNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Secrets(ccmNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ccmNamespace, Name: "hcloud"},
		StringData: map[string]string{"token": e.emu.Token(), "network": "k8s"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, n := range swapNodes {
		labels := map[string]string{
			corev1.LabelInstanceTypeStable: n.typ, corev1.LabelInstanceType: n.typ,
			corev1.LabelTopologyRegion: n.region, corev1.LabelFailureDomainBetaRegion: n.region,
			corev1.LabelTopologyZone: n.zone, corev1.LabelFailureDomainBetaZone: n.zone,
			"instance.hetzner.cloud/provided-by": "cloud",
		}
		opts := []harness.NodeOption{harness.WithLabels(labels), harness.WithoutUninitializedTaint()}
		if network {
			opts = append(opts, harness.WithInternalIP(n.privateIP))
		}
		node := e.c.CreateNode(t, n.name, n.podCIDR, opts...)
		node.Spec.ProviderID = fmt.Sprintf("hcloud://%d", n.id)
		node, err := admin.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("set the provider ID of %s: %v", n.name, err)
		}
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n.name}, {Type: corev1.NodeExternalIP, Address: n.ipv4}}
		if network {
			node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: n.privateIP})
			now := metav1.Now()
			node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{
				Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "RouteCreated",
				Message: "RouteController created a route", LastHeartbeatTime: now, LastTransitionTime: now,
			})
			seedRoute(t, e.emu, endpoint, 1, n.podCIDR, n.privateIP)
		}
		if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("status of %s as the official CCM left it: %v", n.name, err)
		}
	}

	byID := map[string]golden.Case{}
	for _, gc := range golden.Cases(t, root) {
		byID[gc.ID] = gc
	}
	for i, id := range append([]string{ingressCase}, otherCases...) {
		gc, ok := byID[id]
		if !ok {
			t.Fatalf("no golden case %s", id)
		}
		first := gc.Steps[0]
		if strings.Contains(readFile(t, filepath.Join(gc.Dir, first.Name()+".events.txt")), "SyncLoadBalancerFailed") {
			t.Fatalf("golden case %s: the official CCM made no load balancer in its first step", id)
		}
		a := adoptionCase{Case: gc, k: i}
		svc := a.service(t, first)
		if i == 0 {
			svc.Namespace = swapNamespace
		}
		for k, v := range annotate {
			if svc.Annotations == nil {
				svc.Annotations = map[string]string{}
			}
			svc.Annotations[k] = v
		}
		a.uid = createService(t, e.c, svc).UID
		replayOfficial(t, e.api, a, first)
		e.cases = append(e.cases, a)
	}
	e.ingress = e.cases[0]
	return e
}

// serviceNamespace is the namespace of case a's Service.
func (e *swapEnv) serviceNamespace(a adoptionCase) string {
	if a.ID == e.ingress.ID {
		return swapNamespace
	}
	return "default"
}

// nodeState is what the swap must leave alone on a node.
type nodeState struct {
	ProviderID string
	Labels     map[string]string
	Addresses  []corev1.NodeAddress
	Taints     []corev1.Taint
}

func (e *swapEnv) nodes(t *testing.T) map[string]nodeState {
	t.Helper()
	list, err := e.c.Client().CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]nodeState{}
	for _, n := range list.Items {
		out[n.Name] = nodeState{n.Spec.ProviderID, n.Labels, n.Status.Addresses, n.Spec.Taints}
	}
	return out
}

// routes are the routes of network k8s, "destination via gateway", sorted.
func (e *swapEnv) routes(t *testing.T) []string {
	t.Helper()
	network, ok := e.emu.Network(1)
	if !ok {
		t.Fatal("network k8s is gone")
	}
	var out []string
	for _, r := range network.Routes {
		out = append(out, r.Destination+" via "+r.Gateway)
	}
	slices.Sort(out)
	return out
}

// podEnv resolves the environment of d's container as the kubelet would: values as given,
// secretKeyRefs from the Secret (an optional missing key leaves the variable unset, a required
// one fails the test, as the kubelet refuses to start the container).
func podEnv(t *testing.T, c *harness.Cluster, d *appsv1.Deployment) []string {
	t.Helper()
	var out []string
	for _, ev := range d.Spec.Template.Spec.Containers[0].Env {
		switch {
		case ev.ValueFrom == nil:
			out = append(out, ev.Name+"="+ev.Value)
		case ev.ValueFrom.SecretKeyRef != nil:
			ref := ev.ValueFrom.SecretKeyRef
			s, err := c.Client().CoreV1().Secrets(d.Namespace).Get(t.Context(), ref.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("Secret %s of %s: %v", ref.Name, ev.Name, err)
			}
			v, ok := s.Data[ref.Key]
			switch {
			case ok:
				out = append(out, ev.Name+"="+string(v))
			case ref.Optional == nil || !*ref.Optional:
				t.Fatalf("%s: Secret %s has no key %s and the reference is not optional; the pod would not start", ev.Name, ref.Name, ref.Key)
			}
		default:
			t.Fatalf("%s: valueFrom %+v is not resolved by this test", ev.Name, ev.ValueFrom)
		}
	}
	return out
}

// deployment is the CCM's Deployment as stored in the cluster.
func (e *swapEnv) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	d, err := e.c.Client().AppsV1().Deployments(ccmNamespace).Get(t.Context(), "hcloud-cloud-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// startOurs runs our CCM as the Deployment stored in the cluster says: its args, its
// environment resolved from the Secret (the endpoint of the emulator added), its ServiceAccount.
func (e *swapEnv) startOurs(t *testing.T, name string) {
	t.Helper()
	d := e.deployment(t)
	if img := d.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, chartImage+":") {
		t.Fatalf("the stored Deployment runs %s, not this CCM's image", img)
	}
	env := podEnv(t, e.c, d)
	hasNetwork := slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "HCLOUD_NETWORK=") })
	if hasNetwork != e.network {
		t.Fatalf("HCLOUD_NETWORK set: %v, want %v (the official variant's): env %v", hasNetwork, e.network, env)
	}
	e.ccm, _ = startCCM(t, e.c, name, e.api.Endpoint, e.emu.Token(), ccmRun{deployment: d, env: env})
}

// checkQuiet waits until our CCM has reconciled every Service (EnsuredLoadBalancer), every node
// (the node status loop) and, with network, every node's route, then holds swapWindow, and
// checks: no mutating Hetzner request since the swap, nodes and routes as the official left
// them, no PolicyDenied event.
func (e *swapEnv) checkQuiet(t *testing.T, nodesBefore map[string]nodeState, routesBefore []string) {
	t.Helper()
	for _, a := range e.cases {
		waitEvent(t, e.c, e.ccm, e.serviceNamespace(a), a.Service, corev1.EventTypeNormal, "EnsuredLoadBalancer", "")
	}
	waitCCM(t, e.ccm, time.Minute, func() (bool, error) {
		logs := e.ccm.Logs()
		if want := fmt.Sprintf("Update %d nodes status took", len(swapNodes)); !strings.Contains(logs, want) {
			return false, fmt.Errorf("no %q in the log yet: the node status loop has not run", want)
		}
		if !e.network {
			return true, nil
		}
		for _, n := range swapNodes {
			if want := fmt.Sprintf("set node %s with NodeNetworkUnavailable=false was canceled because it is already set", n.name); !strings.Contains(logs, want) {
				return false, fmt.Errorf("no %q in the log yet: the route of %s was not reconciled", want, n.name)
			}
		}
		return true, nil
	})
	t.Logf("every Service, node and route reconciled; holding %v", swapWindow)
	time.Sleep(swapWindow)
	if exited, err := e.ccm.Exited(); exited {
		t.Fatalf("%s exited (%v)", e.ccm.Name, err)
	}
	if n := e.emu.MutatingRequests(); n != 0 {
		t.Errorf("%d mutating Hetzner requests after the swap, want 0: %v", n, e.emu.Counts())
	}
	if diff := cmp.Diff(nodesBefore, e.nodes(t)); diff != "" {
		t.Errorf("nodes changed by the swap (-official +ours):\n%s", diff)
	}
	if diff := cmp.Diff(routesBefore, e.routes(t)); diff != "" {
		t.Errorf("routes changed by the swap (-official +ours):\n%s", diff)
	}
	denied, err := e.c.Client().CoreV1().Events("").List(t.Context(), metav1.ListOptions{FieldSelector: fields.Set{"reason": "PolicyDenied"}.String()})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range denied.Items {
		t.Errorf("PolicyDenied after the swap on %s/%s: %s", ev.InvolvedObject.Namespace, ev.InvolvedObject.Name, ev.Message)
	}
	if !t.Failed() {
		t.Logf("swap: 0 mutating requests in %v after every object was reconciled (%v)", swapWindow, e.emu.Counts())
	}
}

// checkDryRunReport adds port 443 to the Service in the unlabelled namespace, a change the
// example policies deny there: in dry run it runs (the load balancer gets the listener), and the
// would-be denial is reported as a PolicyDryRunDenied event, never as PolicyDenied.
func (e *swapEnv) checkDryRunReport(t *testing.T) {
	t.Helper()
	e.waitPolicyMode(t, "dryrun")
	addPort(t, e.c, e.ingress.Service, "https", 443)
	waitEvent(t, e.c, e.ccm, swapNamespace, e.ingress.Service, corev1.EventTypeWarning, "PolicyDryRunDenied",
		fmt.Sprintf("namespace %q may not expose load balancers publicly", swapNamespace))
	waitLB(t, e.ccm, e.emu, e.ingress.uid, time.Minute, func(lb schema.LoadBalancer) error {
		if !slices.ContainsFunc(lb.Services, func(s schema.LoadBalancerService) bool { return s.ListenPort == 443 }) {
			return fmt.Errorf("no listener on 443 yet: %v", listeners(lb))
		}
		return nil
	})
	if evs, err := events(e.c, swapNamespace, e.ingress.Service, "PolicyDenied"); err != nil || len(evs) != 0 {
		t.Errorf("PolicyDenied events in dry run: %d (%v), want none", len(evs), err)
	}
}

// waitPolicyMode waits until the running CCM has logged that its policy gate is on in mode.
func (e *swapEnv) waitPolicyMode(t *testing.T, mode string) {
	t.Helper()
	want := fmt.Sprintf(`"Policy gate enabled" mode=%q`, mode)
	waitCCM(t, e.ccm, time.Minute, func() (bool, error) {
		return strings.Contains(e.ccm.Logs(), want), fmt.Errorf("%s has not logged %s", e.ccm.Name, want)
	})
}

// addPort adds a TCP port to the Service name in swapNamespace.
func addPort(t *testing.T, c *harness.Cluster, name, portName string, port int32) {
	t.Helper()
	updateService(t, c, swapNamespace, name, func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: portName, Port: port, TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolTCP})
	})
}

// checkEnforced restarts our CCM from the stored Deployment (which must now enforce), adds a port
// (8080) to the Service in the unlabelled namespace, and checks that the example policies deny it:
// a PolicyDenied event naming the namespace, and no mutating request.
func (e *swapEnv) checkEnforced(t *testing.T) {
	t.Helper()
	if args := e.deployment(t).Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--policy-mode=enforce") {
		t.Fatalf("the stored Deployment's args %v do not enforce", args)
	}
	e.ccm.Stop()
	e.emu.ResetRequests()
	e.startOurs(t, "ccm-enforce")
	e.waitPolicyMode(t, "enforce")
	addPort(t, e.c, e.ingress.Service, "alt", 8080)
	waitEvent(t, e.c, e.ccm, swapNamespace, e.ingress.Service, corev1.EventTypeWarning, "PolicyDenied",
		fmt.Sprintf("namespace %q may not expose load balancers publicly", swapNamespace))
	if n := e.emu.MutatingRequests(); n != 0 {
		t.Errorf("%d mutating Hetzner requests with the denial, want 0: %v", n, e.emu.Counts())
	}
}

// officialObjects are the objects of the official CCM's manifest or chart that a swap replaces:
// its ServiceAccount, ClusterRole, ClusterRoleBinding and Deployment (selector selector, one
// replica, --leader-elect=false, HCLOUD_NETWORK from the Secret in the networks variant).
func officialObjects(selector map[string]string, network bool) []any {
	args := []string{"--allow-untagged-cloud", "--cloud-provider=hcloud", officialFeatureGate,
		"--route-reconciliation-period=30s", "--webhook-secure-port=0"}
	env := []corev1.EnvVar{{Name: "HCLOUD_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "hcloud"}, Key: "token"}}}}
	if network {
		args = append(args, "--allocate-node-cidrs=true", "--cluster-cidr=10.244.0.0/16")
		env = append(env, corev1.EnvVar{Name: "HCLOUD_NETWORK", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "hcloud"}, Key: "network"}}})
	}
	args = append(args, "--leader-elect=false")
	replicas := int32(1)
	const name = "hcloud-cloud-controller-manager"
	return []any{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ccmNamespace}},
		&rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: "system:" + name},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"*"}},
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create", "get", "list", "watch", "update"}},
			}},
		&rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: "system:" + name + ":restricted"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:" + name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ccmNamespace}}},
		&appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ccmNamespace},
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: selector},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: selector},
					Spec: corev1.PodSpec{
						ServiceAccountName: name,
						HostNetwork:        network,
						Containers: []corev1.Container{{
							Name: name, Image: "docker.io/hetznercloud/hcloud-cloud-controller-manager:v1.35.0",
							Args: args, Env: env,
						}},
					},
				},
			}},
	}
}

// writeManifest writes objs as one multi-document YAML file.
func writeManifest(t *testing.T, path string, objs []any) {
	t.Helper()
	var docs []string
	for _, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	if err := os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSwapKubectlKeepsOfficialState is the swap from the official deploy/ccm.yaml (no private
// network) with `kubectl apply -k deploy/` (no --force: same selector and container name), as
// deploy/README.md documents it, over the
// state the official CCM left: nodes it initialised, a load balancer it made for a Service in
// the unlabelled namespace ingress-nginx (annotated with its location: the plain manifest sets
// no default), and the official Secret with a `network` key (which the plain variant must not
// read). Our CCM, run as the applied Deployment says, reconciles everything once and then makes
// no mutating request for swapWindow; nodes stay as they were, nothing is denied. The example
// policies run in dry run: port 443 added to the ingress Service is opened, with a
// PolicyDryRunDenied event. With the component deploy/enforce applied, another port is denied.
func TestSwapKubectlKeepsOfficialState(t *testing.T) {
	t.Parallel()
	e := officialState(t, false, "03-defaults-no-network", nil, map[string]string{"load-balancer.hetzner.cloud/location": "fsn1"})
	official := filepath.Join(t.TempDir(), "ccm.yaml")
	writeManifest(t, official, officialObjects(map[string]string{"app": "hcloud-cloud-controller-manager"}, false))
	e.c.Kubectl(t, "apply", "-f", official)
	nodesBefore, routesBefore := e.nodes(t), e.routes(t)
	e.emu.ResetRequests()

	e.c.Kubectl(t, "apply", "-k", deployDir)
	e.c.Kubectl(t, "delete", "clusterrolebinding", "--ignore-not-found",
		"system:hcloud-cloud-controller-manager", "system:hcloud-cloud-controller-manager:restricted")
	e.startOurs(t, "ccm")
	e.checkQuiet(t, nodesBefore, routesBefore)
	e.checkDryRunReport(t)

	e.c.Kubectl(t, "apply", "-k", enforceOverlay(t, deployDir))
	e.checkEnforced(t)
}

// TestSwapHelmKeepsOfficialState is the swap from the official chart with `helm upgrade` of the
// same release, private network and routes on (networking.enabled) and the official default
// values file unchanged plus an operator's default location, over the state the official CCM
// left: nodes with their InternalIPs, a route per node, load balancers attached to the network
// for annotated Services in default and one in ingress-nginx. The release being upgraded is a
// real helm release of the official objects (a chart generated here from them). Our CCM, run as
// the upgraded Deployment says, reconciles everything once, then makes no mutating request for
// swapWindow; nodes and routes stay, nothing is denied; in dry run port 443 added to the
// ingress Service is opened with a PolicyDryRunDenied event. `helm upgrade --reuse-values --set
// policy.mode=enforce` then denies another port on the ingress Service.
func TestSwapHelmKeepsOfficialState(t *testing.T) {
	t.Parallel()
	e := officialState(t, true, "01-defaults-1port",
		[]string{"05-location", "09-type", "19-rdns", "20-proxyprotocol", "25-health-check-full"}, nil)

	chart := t.TempDir()
	if err := os.MkdirAll(filepath.Join(chart, "templates"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(chart, "Chart.yaml"), []byte("apiVersion: v2\nname: hcloud-cloud-controller-manager\nversion: 1.35.0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	selector := map[string]string{"app.kubernetes.io/name": "hcloud-cloud-controller-manager", "app.kubernetes.io/instance": chartRelease}
	writeManifest(t, filepath.Join(chart, "templates", "official.yaml"), officialObjects(selector, true))
	e.c.Helm(t, "install", chartRelease, chart, "--namespace", ccmNamespace)
	nodesBefore, routesBefore := e.nodes(t), e.routes(t)
	if len(routesBefore) != len(swapNodes) {
		t.Fatalf("routes %v, want one per node", routesBefore)
	}
	e.emu.ResetRequests()

	values := filepath.Join(t.TempDir(), "operator-values.yaml")
	if err := os.WriteFile(values, []byte("networking:\n  enabled: true\nenv:\n  HCLOUD_LOAD_BALANCERS_LOCATION:\n    value: fsn1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := e.c.Helm(t, "upgrade", chartRelease, chartDir, "--namespace", ccmNamespace, "--values", officialDefaults, "--values", values)
	// NOTES tell the operator how to read the would-deny report and how to enforce.
	for _, want := range []string{"kubectl get events -A --field-selector reason=PolicyDryRunDenied", "--reuse-values --set policy.mode=enforce"} {
		if !strings.Contains(out, want) {
			t.Errorf("helm upgrade output lacks %q:\n%s", want, out)
		}
	}
	if _, err := e.c.Client().RbacV1().ClusterRoles().Get(t.Context(), "system:hcloud-cloud-controller-manager", metav1.GetOptions{}); err == nil {
		t.Error("the official ClusterRole survived helm upgrade")
	}
	e.startOurs(t, "ccm")
	e.checkQuiet(t, nodesBefore, routesBefore)
	e.checkDryRunReport(t)

	e.c.Helm(t, "upgrade", chartRelease, chartDir, "--namespace", ccmNamespace, "--reuse-values", "--set", "policy.mode=enforce")
	e.checkEnforced(t)
}

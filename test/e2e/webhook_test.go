//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/admission"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// webhookArgs are the flags that serve the admission webhook on port with the serving
// certificate sc, exempting the CCM's own ServiceAccount: the chart's (TestChartAdmission),
// with the test's port and files.
func webhookArgs(port int, sc harness.ServingCert) []string {
	return []string{
		"--webhooks=" + admission.Name,
		"--feature-gates=CloudControllerManagerWebhook=true",
		"--webhook-secure-port=" + strconv.Itoa(port),
		"--webhook-bind-address=127.0.0.1",
		"--webhook-tls-cert-file=" + sc.CertFile,
		"--webhook-tls-private-key-file=" + sc.KeyFile,
		"--admission-exempt-users=system:serviceaccount:" + ccmNamespace + ":" + ccmServiceAccount,
	}
}

// admissionVWC is the key of the chart's ValidatingWebhookConfiguration in a render.
const admissionVWC = "ValidatingWebhookConfiguration//hcloud-cloud-controller-manager-admission-kube-system"

// webhookConfiguration is the chart's ValidatingWebhookConfiguration (admission.enabled=true:
// failurePolicy Ignore, 5 s, Services only, the matchConditions), with a URL on loopback and
// the test CA in place of the in-cluster Service and the chart's generated CA.
func webhookConfiguration(t *testing.T, port int, caPEM []byte) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	renderChart(t, nil, "--set", "admission.enabled=true").decode(t, admissionVWC, &vwc)
	if len(vwc.Webhooks) != 1 {
		t.Fatalf("the chart's webhook configuration has %d webhooks, want 1", len(vwc.Webhooks))
	}
	svc := vwc.Webhooks[0].ClientConfig.Service
	if svc == nil || svc.Path == nil {
		t.Fatalf("the chart's webhook configuration calls no Service path: %+v", vwc.Webhooks[0].ClientConfig)
	}
	url := fmt.Sprintf("https://127.0.0.1:%d%s", port, *svc.Path)
	vwc.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM}
	return &vwc
}

// serviceManifest writes a Service of type LoadBalancer on port 80 and returns its path.
func serviceManifest(t *testing.T, namespace, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), namespace+"-"+name+".yaml")
	doc := fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %s
  namespace: %s
spec:
  type: LoadBalancer
  selector:
    app: %s
  ports:
  - name: http
    port: 80
`, name, namespace, name)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitServing waits until the webhook answers TLS with a certificate of caPEM on port.
func waitServing(t *testing.T, ccm *harness.Process, port int, caPEM []byte) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	harness.WaitFor(t, time.Minute, func() (bool, error) {
		if done, err := ccm.Exited(); done {
			return false, fmt.Errorf("the CCM exited: %w\n%s", err, ccm.Tail(30))
		}
		d := &net.Dialer{Timeout: time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", "127.0.0.1:"+strconv.Itoa(port), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		if err != nil {
			return false, fmt.Errorf("webhook not serving yet: %w", err)
		}
		conn.Close()
		return true, nil
	})
}

// webhookCluster is a cluster whose apiserver calls the CCM's admission webhook.
type webhookCluster struct {
	c        *harness.Cluster
	emu      *hcloudemu.Emulator
	endpoint string
	ccm      *harness.Process
}

// startWebhookCluster starts a cluster with deploy/ applied, the emulator with one server, and
// the CCM with the admission webhook (plus args), and registers the chart's webhook
// configuration; it returns once the webhook serves.
func startWebhookCluster(t *testing.T, args ...string) webhookCluster {
	t.Helper()
	c, emu, endpoint, id := oneWorker(t, "10.244.1.0/24")
	sc := harness.NewServingCert(t, "webhook")
	port := harness.FreePort(t)
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{
		args: append(args, webhookArgs(port, sc)...),
		env:  []string{"HCLOUD_LOAD_BALANCERS_LOCATION=fsn1", "HCLOUD_LOAD_BALANCERS_TYPE=lb11"},
	})
	waitInitialised(t, c, ccm, "worker-1", id)
	waitServing(t, ccm, port, sc.CAPEM)
	if _, err := c.Client().AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(), webhookConfiguration(t, port, sc.CAPEM), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ValidatingWebhookConfiguration: %v", err)
	}
	return webhookCluster{c: c, emu: emu, endpoint: endpoint, ccm: ccm}
}

// TestCCMAdmissionWebhook runs the CCM with the admission webhook enabled and the example
// policies enforced, registered with the kube-apiserver by the chart's
// ValidatingWebhookConfiguration (pointed at loopback), and checks what `kubectl apply` says: a
// Service the policies deny is refused with the policy's message and its decision ID, and
// nothing reaches Hetzner; an allowed one is admitted, with the policies' warning printed as
// "Warning: ..."; a change out of type LoadBalancer is refused when the policies deny the
// delete it causes, with a warning naming the monthly cost it would save; and with the CCM
// stopped, `kubectl apply` still works (failurePolicy Ignore).
func TestCCMAdmissionWebhook(t *testing.T) {
	t.Parallel()
	w := startWebhookCluster(t, enforce)
	c, emu, ccm := w.c, w.emu, w.ccm
	ctx := context.Background()
	admin := c.Client()
	c.Kubectl(t, "create", "namespace", "shop")
	emu.ResetRequests()

	// Denied: the example policies keep namespace shop private. The apiserver picks the
	// webhook configuration up within a moment, so apply until it refuses.
	denied := serviceManifest(t, "shop", "web")
	var out string
	harness.WaitFor(t, time.Minute, func() (bool, error) {
		var err error
		out, err = c.KubectlErr(t, "apply", "-f", denied)
		if err == nil {
			// Admitted before the webhook was in force: take it back and try again.
			c.Kubectl(t, "delete", "-f", denied, "--wait=true")
			return false, fmt.Errorf("admitted (webhook not in force yet): %s", out)
		}
		return true, nil
	})
	t.Logf("kubectl apply of the denied Service:\n%s", out)
	for _, want := range []string{
		`admission webhook "services.hcloud-policy-ccm.io" denied the request`,
		`namespace "shop" may not expose load balancers publicly`,
		"[public_exposure_not_allowed]",
		"(decision ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl output lacks %q:\n%s", want, out)
		}
	}
	if _, err := admin.CoreV1().Services("shop").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the denied Service was stored (get: %v)", err)
	}
	// The webhook reads the cloud (the load balancer by label and by name, the type list),
	// never writes.
	if n := emu.MutatingRequests(); n != 0 {
		t.Errorf("%d mutating Hetzner requests after the denial at admission, want 0: %v", n, emu.Counts())
	}
	if lbs := emu.LoadBalancers(); len(lbs) != 0 {
		t.Errorf("%d load balancers after the denial, want 0", len(lbs))
	}
	// The decision ID in kubectl's message is the decision_id of the decision log line
	// (--policy-decision-log=deny, the default, on stdout): the denial traces to the log.
	if m := regexp.MustCompile(`\(decision ([0-9a-f-]{36})\)`).FindStringSubmatch(out); m == nil {
		t.Errorf("no decision ID in kubectl's output")
	} else if logs := ccm.Logs(); !strings.Contains(logs, `"decision_id":"`+m[1]+`"`) {
		t.Errorf("decision %s of the denial is not in the CCM's decision log", m[1])
	}

	// Allowed, with a warning: namespace default may be public; port 80 without 443 warns.
	allowed := serviceManifest(t, "default", "web")
	out = c.Kubectl(t, "apply", "-f", allowed)
	t.Logf("kubectl apply of the allowed Service:\n%s", out)
	if !strings.Contains(out, "service/web created") {
		t.Errorf("the allowed Service was not created:\n%s", out)
	}
	if !strings.Contains(out, "the load balancer listens on port 80 without 443") || !strings.Contains(out, "Warning: "+admission.WarningPrefix+"create(") {
		t.Errorf("kubectl printed no policy warning:\n%s", out)
	}
	harness.WaitFor(t, 2*time.Minute, func() (bool, error) {
		svc, err := admin.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(svc.Status.LoadBalancer.Ingress) > 0, fmt.Errorf("service default/web has no ingress yet")
	})
	// The CCM's own writes on it (finalizer, status) went through: the ingress is there.

	// Leaving type LoadBalancer plans the delete of the load balancer: the example policy
	// protection.rego denies deleting one labelled hcloud-ccm/protected=true in Hetzner.
	lbs := emu.LoadBalancers()
	if len(lbs) != 1 {
		t.Fatalf("%d load balancers, want the one of default/web", len(lbs))
	}
	client := hcloud.NewClient(hcloud.WithEndpoint(w.endpoint), hcloud.WithToken(emu.Token()))
	labels := maps.Clone(lbs[0].Labels)
	labels["hcloud-ccm/protected"] = "true"
	if _, _, err := client.LoadBalancer.Update(ctx, &hcloud.LoadBalancer{ID: lbs[0].ID}, hcloud.LoadBalancerUpdateOpts{Labels: labels}); err != nil {
		t.Fatalf("label the load balancer protected: %v", err)
	}
	emu.ResetRequests()
	out, err := c.KubectlErr(t, "patch", "service", "web", "-n", "default", "-p", `{"spec":{"type":"ClusterIP"}}`)
	t.Logf("kubectl patch to ClusterIP:\n%s", out)
	if err == nil || !strings.Contains(out, "denied the request") || !strings.Contains(out, "must not be deleted") || !strings.Contains(out, "delete(") {
		t.Errorf("the change to ClusterIP of a protected load balancer was not refused with the policy's message: %v\n%s", err, out)
	}
	// The refusal names what the change would have saved: the lb11's placeholder price (the
	// CCM read the type list with its prices for the create).
	if want := "Warning: " + admission.WarningPrefix + "monthly cost of this change: -5.00 EUR net (-5.95 gross)"; !strings.Contains(out, want) {
		t.Errorf("kubectl printed no cost warning %q:\n%s", want, out)
	}
	if n := emu.MutatingRequests(); n != 0 {
		t.Errorf("%d mutating Hetzner requests after the refused type change, want 0: %v", n, emu.Counts())
	}
	if svc, err := admin.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{}); err != nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Errorf("default/web after the refused change: %v, %v; want still type LoadBalancer", err, svc)
	}

	// Outage: with the CCM stopped, Service writes still work (failurePolicy Ignore); the
	// CCM-side gate decides when it is back.
	ccm.Stop()
	out, err = c.KubectlErr(t, "apply", "-f", serviceManifest(t, "shop", "web2"))
	if err != nil {
		t.Fatalf("kubectl apply with the CCM stopped failed; failurePolicy Ignore should admit it: %v\n%s", err, out)
	}
	if !strings.Contains(out, "service/web2 created") {
		t.Errorf("kubectl apply with the CCM stopped:\n%s", out)
	}
}

// TestChartAdmission renders the chart with and without admission.enabled: off (the default)
// renders nothing of the webhook; on, the Secret holds a CA and a serving certificate for the
// webhook Service's DNS name signed by it, the webhook configuration trusts that CA, calls the
// Service with failurePolicy Ignore and 5 s, and the pod serves the webhook with the Secret's
// files and exempts its own ServiceAccount.
func TestChartAdmission(t *testing.T) {
	t.Parallel()
	off := renderChart(t, []string{officialDefaults})
	for _, k := range off.kinds {
		if strings.Contains(k, "admission") {
			t.Errorf("the default render has %s; admission is off by default", k)
		}
	}
	for _, a := range off.deployment.Spec.Template.Spec.Containers[0].Args {
		if strings.Contains(a, "--webhooks") || strings.Contains(a, "admission") {
			t.Errorf("the default render passes %s", a)
		}
	}

	on := renderChart(t, []string{officialDefaults}, "--set", "admission.enabled=true,admission.namespaceSelector.matchLabels.team=shop")
	const name = "hcloud-cloud-controller-manager-admission"
	var secret corev1.Secret
	on.decode(t, "Secret/"+ccmNamespace+"/"+name, &secret)
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	on.decode(t, admissionVWC, &vwc)
	var svc corev1.Service
	on.decode(t, "Service/"+ccmNamespace+"/"+name, &svc)

	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(secret.Data["ca.crt"]) {
		t.Fatalf("the Secret's ca.crt holds no certificate")
	}
	pair, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"])
	if err != nil {
		t.Fatalf("the Secret's tls.crt and tls.key: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	host := name + "." + ccmNamespace + ".svc"
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
		t.Errorf("the serving certificate does not verify for %s with the chart's CA: %v", host, err)
	}
	wh := vwc.Webhooks[0]
	if string(wh.ClientConfig.CABundle) != string(secret.Data["ca.crt"]) {
		t.Errorf("the webhook's caBundle is not the Secret's ca.crt")
	}
	if s := wh.ClientConfig.Service; s == nil || s.Name != svc.Name || s.Namespace != ccmNamespace || s.Path == nil || *s.Path != admission.Path {
		t.Errorf("the webhook calls %+v, want Service %s/%s path %s", s, ccmNamespace, svc.Name, admission.Path)
	}
	if wh.FailurePolicy == nil || *wh.FailurePolicy != admissionregistrationv1.Ignore || wh.TimeoutSeconds == nil || *wh.TimeoutSeconds != 5 {
		t.Errorf("failurePolicy %v timeoutSeconds %v, want Ignore and 5", wh.FailurePolicy, wh.TimeoutSeconds)
	}
	if wh.NamespaceSelector == nil || wh.NamespaceSelector.MatchLabels["team"] != "shop" {
		t.Errorf("namespaceSelector = %v, want admission.namespaceSelector", wh.NamespaceSelector)
	}
	if len(wh.Rules) != 1 || strings.Join(wh.Rules[0].Resources, ",") != "services" {
		t.Errorf("rules = %+v, want services only (not services/status)", wh.Rules)
	}

	pod := on.deployment.Spec.Template.Spec
	args := strings.Join(pod.Containers[0].Args, " ")
	for _, want := range []string{
		"--webhooks=" + admission.Name, "--feature-gates=CloudControllerManagerWebhook=true", "--webhook-secure-port=10260",
		"--webhook-tls-cert-file=/etc/hcloud-policy-ccm/admission/tls.crt", "--webhook-tls-private-key-file=/etc/hcloud-policy-ccm/admission/tls.key",
		"--admission-exempt-users=system:serviceaccount:" + ccmNamespace + ":" + ccmServiceAccount, "--admission-timeout=4500ms",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("the Deployment's args lack %s: %s", want, args)
		}
	}
	mounted := false
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Secret.SecretName == name {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("the pod does not mount Secret %s", name)
	}

	cm := renderChart(t, []string{officialDefaults}, "--set", "admission.enabled=true,admission.certManager.enabled=true")
	if _, ok := cm.docs["Secret/"+ccmNamespace+"/"+name]; ok {
		t.Errorf("with cert-manager the chart still renders the Secret")
	}
	for _, key := range []string{"Certificate/" + ccmNamespace + "/" + name, "Issuer/" + ccmNamespace + "/" + name} {
		if _, ok := cm.docs[key]; !ok {
			t.Errorf("with cert-manager the chart renders no %s", key)
		}
	}
	if !strings.Contains(cm.docs[admissionVWC], "cert-manager.io/inject-ca-from: "+ccmNamespace+"/"+name) {
		t.Errorf("with cert-manager the webhook configuration has no inject-ca-from annotation")
	}
}

// TestChartAdmissionRefuses: admission values the chart cannot honour fail the render naming
// the value and the fix.
func TestChartAdmissionRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ set, want string }{
		{"admission.enabled=true,admission.failurePolicy=Sometimes", `admission.failurePolicy: "Sometimes" is not supported; set it to Ignore`},
		{"admission.enabled=true,admission.timeoutSeconds=40", "admission.timeoutSeconds: 40 is out of range; set 1 to 30"},
		{"admission.enabled=true,admission.port=10258", "admission.port: 10258 is not usable"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := harness.RunHelm(t, "template", chartRelease, chartDir, "--namespace", ccmNamespace, "--set", tc.set)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template --set %s: %v, want an error containing %q", tc.set, err, tc.want)
			}
		})
	}
}

// TestChartAdmissionCertStable installs the chart with admission.enabled into a real
// kube-apiserver and upgrades it: the generated CA and serving certificate are kept (lookup of
// the Secret), so the caBundle does not change under running webhook calls.
func TestChartAdmissionCertStable(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	ctx := context.Background()
	admin := c.Client()
	get := func() (ca, crt []byte, bundle []byte) {
		t.Helper()
		s, err := admin.CoreV1().Secrets(ccmNamespace).Get(ctx, "hcloud-cloud-controller-manager-admission", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get the admission Secret: %v", err)
		}
		vwc, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "hcloud-cloud-controller-manager-admission-kube-system", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get the webhook configuration: %v", err)
		}
		return s.Data["ca.crt"], s.Data["tls.crt"], vwc.Webhooks[0].ClientConfig.CABundle
	}
	base := []string{chartRelease, chartDir, "--namespace", ccmNamespace, "--values", officialDefaults, "--set", "admission.enabled=true"}
	c.Helm(t, append([]string{"install"}, base...)...)
	ca1, crt1, bundle1 := get()
	if string(bundle1) != string(ca1) {
		t.Errorf("after install the caBundle is not the Secret's CA")
	}
	c.Helm(t, append([]string{"upgrade"}, base...)...)
	ca2, crt2, bundle2 := get()
	if string(ca1) != string(ca2) || string(crt1) != string(crt2) || string(bundle1) != string(bundle2) {
		t.Errorf("helm upgrade replaced the webhook's CA or serving certificate; lookup should keep them")
	}
}

// TestCCMAdmissionWebhookDryRun: with --policy-mode=dryrun (the chart's default) the webhook
// refuses nothing; kubectl prints what would be denied, with the decision ID.
func TestCCMAdmissionWebhookDryRun(t *testing.T) {
	t.Parallel()
	w := startWebhookCluster(t, "--policy-mode=dryrun")
	w.c.Kubectl(t, "create", "namespace", "shop")
	manifest := serviceManifest(t, "shop", "web")
	var out string
	harness.WaitFor(t, time.Minute, func() (bool, error) {
		out = w.c.Kubectl(t, "apply", "-f", manifest)
		if strings.Contains(out, "would be denied (dry run)") {
			return true, nil
		}
		// Admitted before the webhook was in force: take it back and try again.
		w.c.Kubectl(t, "delete", "-f", manifest, "--wait=true")
		return false, fmt.Errorf("no dry-run warning (webhook not in force yet?): %s", out)
	})
	t.Logf("kubectl apply in dry run:\n%s", out)
	for _, want := range []string{
		"Warning: " + admission.WarningPrefix + "would be denied (dry run): create(",
		`namespace "shop" may not expose load balancers publicly`,
		"[public_exposure_not_allowed]",
		"service/web created",
		"(decision ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl output lacks %q:\n%s", want, out)
		}
	}
}

//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/admission"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// webhookArgs are the flags that serve the admission webhook on port with the serving
// certificate sc, exempting the CCM's own ServiceAccount.
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

// webhookConfiguration is the ValidatingWebhookConfiguration the chart installs (failurePolicy
// Ignore, 5 s, Services only, matchConditions for type LoadBalancer and the CCM's own
// ServiceAccount left out), with a URL on loopback in place of the in-cluster Service.
func webhookConfiguration(port int, caPEM []byte) *admissionregistrationv1.ValidatingWebhookConfiguration {
	url := fmt.Sprintf("https://127.0.0.1:%d%s", port, admission.Path)
	ignore := admissionregistrationv1.Ignore
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(5)
	scope := admissionregistrationv1.NamespacedScope
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hcloud-policy-ccm"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "services.hcloud-policy-ccm.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			FailurePolicy:           &ignore,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}, Scope: &scope,
				},
			}},
			MatchConditions: []admissionregistrationv1.MatchCondition{
				{Name: "load-balancer", Expression: "object.spec.type == 'LoadBalancer' || (oldObject != null && oldObject.spec.type == 'LoadBalancer')"},
				{Name: "not-the-ccm", Expression: "request.userInfo.username != 'system:serviceaccount:" + ccmNamespace + ":" + ccmServiceAccount + "'"},
			},
		}},
	}
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

// TestCCMAdmissionWebhook runs the CCM with the admission webhook enabled and the example
// policies enforced, registered with the kube-apiserver as the chart registers it, and checks
// what `kubectl apply` says: a Service the policies deny is refused with the policy's message
// and its decision ID, and nothing reaches Hetzner; an allowed one is admitted, with the
// policies' warning printed as "Warning: ..."; and with the CCM stopped, `kubectl apply` still
// works (failurePolicy Ignore).
func TestCCMAdmissionWebhook(t *testing.T) {
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	emu, endpoint := hcloudemu.NewTestServer(t)
	id, err := emu.AddServer(hcloudemu.ServerSpec{Name: "worker-1"})
	if err != nil {
		t.Fatalf("add server: %v", err)
	}
	c.CreateNode(t, "worker-1", "10.244.1.0/24")
	sc := harness.NewServingCert(t, "webhook")
	port := harness.FreePort(t)
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{
		args: append([]string{enforce}, webhookArgs(port, sc)...),
		env:  []string{"HCLOUD_LOAD_BALANCERS_LOCATION=fsn1", "HCLOUD_LOAD_BALANCERS_TYPE=lb11"},
	})
	waitInitialised(t, c, ccm, "worker-1", id)
	waitServing(t, ccm, port, sc.CAPEM)

	ctx := context.Background()
	admin := c.Client()
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, webhookConfiguration(port, sc.CAPEM), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ValidatingWebhookConfiguration: %v", err)
	}
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
	if !strings.Contains(out, "Warning: "+admission.WarningPrefix+"the load balancer listens on port 80 without 443") {
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

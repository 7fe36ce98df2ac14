//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// TestDeployMetricsOnlyWhereAuthorized runs the CCM with the environment of deploy/'s Deployment
// and proves that its metrics are served only where the cluster authorizes them: nothing listens
// on the official CCM's unauthenticated metrics address, and the secure port's /metrics answers
// a ServiceAccount bound to system:hcloud-policy-ccm:metrics-reader, and refuses anonymous
// requests and other ServiceAccounts.
func TestDeployMetricsOnlyWhereAuthorized(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	admin := c.Client()
	ctx := context.Background()

	// The Deployment's literal env (HCLOUD_METRICS_ENABLED=false), as the pod would get it.
	var env []string
	for _, e := range render(t, deployDir).deployment.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	metricsPort := harness.FreePort(t)
	env = append(env, "HCLOUD_METRICS_ADDRESS=127.0.0.1:"+strconv.Itoa(metricsPort))

	const monitoring = "monitoring"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: monitoring}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"prometheus", "other"} {
		if _, err := admin.CoreV1().ServiceAccounts(monitoring).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-hcloud-ccm-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:hcloud-policy-ccm:metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: monitoring, Name: "prometheus"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := func(name string) string {
		tr, err := admin.CoreV1().ServiceAccounts(monitoring).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}

	emu, endpoint := hcloudemu.NewTestServer(t)
	_, port := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{env: env})

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // self-signed in-memory certificate, as in the pod
	}}
	get := func(bearer string) (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	// Wait for the secure port.
	harness.WaitFor(t, time.Minute, func() (bool, error) {
		_, _, err := get("")
		return err == nil, err
	})

	code, body, err := get(token("prometheus"))
	if err != nil || code != http.StatusOK || !strings.Contains(body, "hcloud_ccm_api_requests_total") {
		t.Errorf("GET /metrics on the secure port as the bound ServiceAccount = %d, %v, want 200 with hcloud_ccm_api_requests_total", code, err)
	}
	for _, tc := range []struct{ who, bearer string }{{"anonymous", ""}, {"an unbound ServiceAccount", token("other")}} {
		if code, _, err := get(tc.bearer); err != nil || (code != http.StatusUnauthorized && code != http.StatusForbidden) {
			t.Errorf("GET /metrics on the secure port as %s = %d, %v, want 401 or 403", tc.who, code, err)
		}
	}
	if conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(metricsPort), time.Second); err == nil {
		conn.Close()
		t.Errorf("something listens on HCLOUD_METRICS_ADDRESS 127.0.0.1:%d although deploy/ sets HCLOUD_METRICS_ENABLED=false", metricsPort)
	}
}

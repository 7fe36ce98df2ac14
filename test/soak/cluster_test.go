//go:build soak

package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

const (
	deployDir = "../../deploy"
	// ccmNamespace and ccmServiceAccount are deploy/'s ServiceAccount, which the leader
	// replicas run as.
	ccmNamespace      = "kube-system"
	ccmServiceAccount = "hcloud-cloud-controller-manager"
	// webhookServiceAccount is the webhook replica's own ServiceAccount, bound to the same
	// roles, so that the apiserver's audit log tells its requests apart.
	webhookServiceAccount = "hcloud-ccm-webhook"
	// policyConfigMap is deploy/'s policy ConfigMap (the example policies).
	policyConfigMap = "hcloud-ccm-policies"
	deploymentName  = "hcloud-cloud-controller-manager"
)

// webhookUser is the user name of the webhook replica in the audit log.
var webhookUser = "system:serviceaccount:" + ccmNamespace + ":" + webhookServiceAccount

// auditPolicy records, at Request level (with the body, for events' reasons), every write of
// the webhook replica's ServiceAccount, and at Metadata level its every request to the policy
// reports; nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  users: ["%[1]s"]
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: Metadata
  users: ["%[1]s"]
  resources:
  - group: "wgpolicyk8s.io"
- level: None
`

// startCluster starts etcd and kube-apiserver with an audit log of the webhook replica's
// requests, applies deploy/ and gives the webhook replica's ServiceAccount deploy/'s roles. It
// returns the cluster and the audit log's path.
func startCluster(t *testing.T) (*harness.Cluster, string) {
	t.Helper()
	dir := t.TempDir()
	policyPath, logPath := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(harness.LogDir(t), "audit.log")
	if err := os.WriteFile(policyPath, []byte(fmt.Sprintf(auditPolicy, webhookUser)), 0o600); err != nil {
		t.Fatalf("write audit policy: %v", err)
	}
	c := harness.Start(t, harness.WithAPIServerArgs(
		"--audit-policy-file="+policyPath, "--audit-log-path="+logPath, "--audit-log-format=json",
		"--audit-log-mode=blocking"))
	c.ApplyKustomize(t, deployDir)
	installReportCRDs(t, c, dir)
	if err := bindWebhookAccount(context.Background(), c); err != nil {
		t.Fatalf("%v", err)
	}
	return c, logPath
}

// reportCRD is a CustomResourceDefinition of the wgpolicyk8s.io/v1alpha2 reports the audit
// writes, with a schema that keeps every field (the chart's, deploy/chart/templates/
// policyreport-crds.yaml, is a Helm template; the soak only needs the audit's writes to land).
const reportCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[2]s.wgpolicyk8s.io
spec:
  group: wgpolicyk8s.io
  names: {kind: %[1]s, listKind: %[1]sList, plural: %[2]s, singular: %[3]s}
  scope: %[4]s
  versions:
  - name: v1alpha2
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// installReportCRDs installs the PolicyReport and ClusterPolicyReport CRDs and waits until they
// are served, so that the audit's report writes reach the apiserver (and its audit log).
func installReportCRDs(t *testing.T, c *harness.Cluster, dir string) {
	t.Helper()
	path := filepath.Join(dir, "report-crds.yaml")
	doc := fmt.Sprintf(reportCRD, "PolicyReport", "policyreports", "policyreport", "Namespaced") + "---\n" +
		fmt.Sprintf(reportCRD, "ClusterPolicyReport", "clusterpolicyreports", "clusterpolicyreport", "Cluster")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatalf("write report CRDs: %v", err)
	}
	c.ApplyFile(t, path)
	c.Kubectl(t, "wait", "--for=condition=established", "--timeout=60s",
		"crd/policyreports.wgpolicyk8s.io", "crd/clusterpolicyreports.wgpolicyk8s.io")
}

// bindWebhookAccount creates the webhook replica's ServiceAccount and adds it to every binding
// of deploy/'s ServiceAccount, so that both have the same rights.
func bindWebhookAccount(ctx context.Context, c *harness.Cluster) error {
	cl := c.Client()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ccmNamespace, Name: webhookServiceAccount}}
	if _, err := cl.CoreV1().ServiceAccounts(ccmNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("bind webhook account: create serviceaccount: %w", err)
	}
	subject := rbacv1.Subject{Kind: "ServiceAccount", Namespace: ccmNamespace, Name: webhookServiceAccount}
	isCCM := func(s rbacv1.Subject) bool {
		return s.Kind == "ServiceAccount" && s.Namespace == ccmNamespace && s.Name == ccmServiceAccount
	}
	crbs, err := cl.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("bind webhook account: list clusterrolebindings: %w", err)
	}
	for _, b := range crbs.Items {
		if slices.ContainsFunc(b.Subjects, isCCM) {
			b.Subjects = append(b.Subjects, subject)
			if _, err := cl.RbacV1().ClusterRoleBindings().Update(ctx, &b, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("bind webhook account: update clusterrolebinding %s: %w", b.Name, err)
			}
		}
	}
	rbs, err := cl.RbacV1().RoleBindings(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("bind webhook account: list rolebindings: %w", err)
	}
	for _, b := range rbs.Items {
		if slices.ContainsFunc(b.Subjects, isCCM) {
			b.Subjects = append(b.Subjects, subject)
			if _, err := cl.RbacV1().RoleBindings(b.Namespace).Update(ctx, &b, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("bind webhook account: update rolebinding %s/%s: %w", b.Namespace, b.Name, err)
			}
		}
	}
	return nil
}

// deploymentArgs are the container args of deploy/'s Deployment as applied.
func deploymentArgs(ctx context.Context, c *harness.Cluster) ([]string, error) {
	d, err := c.Client().AppsV1().Deployments(ccmNamespace).Get(ctx, deploymentName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("deployment args: %w", err)
	}
	return slices.Clone(d.Spec.Template.Spec.Containers[0].Args), nil
}

// ccmFlags are the flags the soak adds to the Deployment's: the example policies enforced,
// every decision logged, short drift, sweep and audit periods, and a leader election that
// fails over within seconds (with room for a loaded 2-core machine: 8 s, renewed within 6 s).
func ccmFlags(intervals intervals) []string {
	return []string{
		"--policy-mode=enforce",
		"--policy-decision-log=all",
		"--load-balancer-drift-interval=" + intervals.drift.String(),
		"--load-balancer-group-sweep-interval=" + intervals.sweep.String(),
		"--policy-audit-interval=" + intervals.audit.String(),
		"--leader-elect-lease-duration=8s",
		"--leader-elect-renew-deadline=6s",
		"--leader-elect-retry-period=2s",
		"--bind-address=127.0.0.1",
		"--v=2",
	}
}

// webhookFlags make a replica serve the admission webhook as deploy/README.md § Without the
// chart says, on port with the serving certificate sc. Its leader election retries once an hour
// and trusts an observed Lease for two, so it never takes the Lease from a running leader: it
// is the webhook-only replica beside the leader (started after the leader holds the Lease).
func webhookFlags(port int, sc harness.ServingCert) []string {
	return []string{
		"--webhooks=service-policy",
		"--feature-gates=CloudControllerManagerWebhook=true",
		"--webhook-secure-port=" + strconv.Itoa(port),
		"--webhook-bind-address=127.0.0.1",
		"--webhook-tls-cert-file=" + sc.CertFile,
		"--webhook-tls-private-key-file=" + sc.KeyFile,
		"--admission-exempt-users=system:serviceaccount:" + ccmNamespace + ":" + ccmServiceAccount,
		"--leader-elect-lease-duration=2h",
		"--leader-elect-renew-deadline=90m",
		"--leader-elect-retry-period=1h",
	}
}

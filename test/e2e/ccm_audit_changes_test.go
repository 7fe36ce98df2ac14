//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// TestCCMAuditSeesFixesInSeconds (issue 42): with an audit interval of 10 minutes, a fix shows
// in the PolicyReports within seconds, by the audit the change itself starts (from the caches,
// after a debounce of 2 s). Two lb31 Services in two namespaces are reported after a revision
// refuses lb31 outside labelled namespaces; labelling one namespace removes its result with no
// request to Hetzner, and changing the other Service's type removes the other. Each fix → gone
// time is logged and must stay far below the interval.
func TestCCMAuditSeesFixesInSeconds(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id := oneWorker(t, "10.244.1.0/24")
	installPolicyReportCRDs(t, c)
	port := harness.FreePort(t)
	run := ccmRun{
		env:  append(slices.Clone(lbEnv), "HCLOUD_METRICS_ENABLED=true", "HCLOUD_METRICS_ADDRESS=127.0.0.1:"+strconv.Itoa(port)),
		args: []string{"--policy-audit-interval=10m"},
	}
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), run)
	waitInitialised(t, c, ccm, "worker-1", id)
	applyPolicyData(t, c, ccm, func(config map[string]any) { config["large_load_balancer_types"] = []string{} })
	for _, ns := range []string{"shop", "blog"} {
		createNamespace(t, c, ns)
		labelNamespace(t, c, ns, "hcloud-ccm/public", "true") // the example policies' public namespaces
		svc := loadBalancerService(ns, "big")
		svc.Spec.Ports[0].Port = 443 // port 80 alone draws a warning of the example policies
		svc.Annotations = map[string]string{annotationPrefix + "type": "lb31"}
		created := createService(t, c, svc)
		waitLB(t, ccm, emu, created.UID, time.Minute, nil)
		waitIngress(t, c, ccm, ns, "big")
	}
	applyPolicyData(t, c, ccm, func(config map[string]any) { config["large_load_balancer_types"] = []string{"lb31"} })
	waitResults(t, ccm, dyn(t, c), "blog|lb_type_needs_namespace_label|fail|big", "shop|lb_type_needs_namespace_label|fail|big")
	time.Sleep(3 * time.Second) // the audits the creates started are over
	emu.ResetRequests()

	start := time.Now()
	labelNamespace(t, c, "shop", "hcloud-ccm/large-load-balancers", "true")
	waitResults(t, ccm, dyn(t, c), "blog|lb_type_needs_namespace_label|fail|big")
	labelled := time.Since(start)
	if got := emu.Requests(); len(got) != 0 {
		t.Errorf("%d requests to Hetzner between the namespace's label and its result gone, want 0: %v", len(got), emu.Counts())
	}

	start = time.Now()
	updateService(t, c, "blog", "big", func(s *corev1.Service) { s.Annotations[annotationPrefix+"type"] = "lb11" })
	waitResults(t, ccm, dyn(t, c))
	fixed := time.Since(start)
	t.Logf("fix → result gone: namespace labelled %.2f s, Service fixed %.2f s (audit interval 10 min, debounce 2 s)", labelled.Seconds(), fixed.Seconds())
	for what, took := range map[string]time.Duration{"namespace labelled": labelled, "Service fixed": fixed} {
		if took > 20*time.Second {
			t.Errorf("%s: the result went after %v, want within seconds", what, took)
		}
	}
	if !strings.Contains(ccm.Logs(), "fromCaches=true") {
		t.Error(`no "Policy audit done" line with fromCaches=true: the results went by another audit`)
	}
}

// labelNamespace sets the label key=value on the namespace.
func labelNamespace(t *testing.T, c *harness.Cluster, name, key, value string) {
	t.Helper()
	namespaces := c.Client().CoreV1().Namespaces()
	ns, err := namespaces.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get namespace %s: %v", name, err)
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[key] = value
	if _, err := namespaces.Update(context.Background(), ns, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("label namespace %s: %v", name, err)
	}
}

// TestCCMAuditQuotaNamesTheExtra (issue 42): the audit judges each load balancer on the
// inventory it met when it was created (the older ones), so a quota report names exactly the
// load balancer over it. Three lb11 in default (created a, b, c) under the example policies in
// dry run: max_load_balancers_per_namespace 2 reports c alone; back at 10, a monthly budget of
// 12 EUR on the namespace (5 EUR each: 5, 10, 15) reports c alone again.
func TestCCMAuditQuotaNamesTheExtra(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id := oneWorker(t, "10.244.1.0/24")
	installPolicyReportCRDs(t, c)
	run, _ := auditRun(t)
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), run)
	waitInitialised(t, c, ccm, "worker-1", id)
	for _, name := range []string{"a", "b", "c"} { // one after the other: Hetzner's created order
		svc := loadBalancerService("default", name)
		svc.Spec.Ports[0].Port = 443 // port 80 alone draws a warning of the example policies
		created := createService(t, c, svc)
		waitLB(t, ccm, emu, created.UID, time.Minute, nil)
		waitIngress(t, c, ccm, "default", name)
	}
	waitResults(t, ccm, dyn(t, c))
	quota := func(limit int) func(config map[string]any) {
		return func(config map[string]any) {
			quotas, _ := config["quotas"].(map[string]any)
			quotas["max_load_balancers_per_namespace"] = limit
		}
	}
	applyPolicyData(t, c, ccm, quota(2))
	waitResults(t, ccm, dyn(t, c), "default|quota_load_balancers_per_namespace|fail|c")

	applyPolicyData(t, c, ccm, quota(10))
	waitResults(t, ccm, dyn(t, c))
	labelNamespace(t, c, "default", "hcloud-policy-ccm.io/monthly-budget", "12")
	waitResults(t, ccm, dyn(t, c), "default|quota_monthly_budget|fail|c")
}

// TestCCMAuditMetricsUnderEnforce (issue 42): under --policy-mode=enforce the audit's decisions
// are counted with source="audit" and never as enforced denials; the gate's series do not grow
// with the audits.
func TestCCMAuditMetricsUnderEnforce(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id := oneWorker(t, "10.244.1.0/24")
	run, port := auditRun(t)
	run.args = append(run.args, "--policy-mode=enforce")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), run)
	waitInitialised(t, c, ccm, "worker-1", id)
	applyPolicyData(t, c, ccm, func(config map[string]any) { config["large_load_balancer_types"] = []string{} })
	svc := loadBalancerService("default", "big")
	svc.Spec.Ports[0].Port = 443
	svc.Annotations = map[string]string{annotationPrefix + "type": "lb31"}
	created := createService(t, c, svc)
	waitLB(t, ccm, emu, created.UID, time.Minute, nil)
	waitIngress(t, c, ccm, "default", "big")

	applyPolicyData(t, c, ccm, func(config map[string]any) { config["large_load_balancer_types"] = []string{"lb31"} })
	waitMetric(t, ccm, port, `hcloud_ccm_policy_audit_violations{action="deny",code="lb_type_needs_namespace_label"}`, 1)
	const create, code = `action="loadbalancer.create"`, `code="lb_type_needs_namespace_label"`
	tests := []struct {
		series string
		want   func(float64) bool
		what   string
	}{
		{`hcloud_ccm_policy_decisions_total{` + create + `,result="deny",source="audit"}`, func(v float64) bool { return v >= 1 }, "at least 1"},
		{`hcloud_ccm_policy_denials_total{` + create + `,` + code + `,enforced="false",source="audit"}`, func(v float64) bool { return v >= 1 }, "at least 1"},
		{`hcloud_ccm_policy_denials_total{` + create + `,` + code + `,enforced="true",source="audit"}`, func(v float64) bool { return v == -1 }, "no series"},
		{`hcloud_ccm_policy_denials_total{` + create + `,` + code + `,enforced="true",source="gate"}`, func(v float64) bool { return v == -1 }, "no series"},
		{`hcloud_ccm_policy_decisions_total{` + create + `,result="deny",source="gate"}`, func(v float64) bool { return v == -1 }, "no series"},
	}
	for _, tc := range tests {
		got, err := metric(port, tc.series)
		if err != nil {
			t.Fatal(err)
		}
		if !tc.want(got) {
			t.Errorf("%s = %v, want %s", tc.series, got, tc.what)
		}
	}
}

// TestCCMAuditRefusedMemberReportedOnce (issue 42 §4): under --policy-mode=enforce, a member of
// group "web" whose port the policy refuses gets PolicyDenied from the gate; its listener never
// exists, so the audits that follow report nothing on it (no PolicyViolation), while the
// members the load balancer serves are still judged.
func TestCCMAuditRefusedMemberReportedOnce(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id := oneWorker(t, "10.244.1.0/24")
	run, port := auditRun(t)
	run.args = append(run.args, "--policy-mode=enforce")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), run)
	waitInitialised(t, c, ccm, "worker-1", id)
	applyPolicyData(t, c, ccm, func(config map[string]any) { config["listen_ports"] = []int{81, 443} })
	for _, m := range []struct {
		name string
		port int32
	}{{"a", 443}, {"b", 81}} {
		createService(t, c, groupService("default", m.name, "web", m.port))
		waitIngress(t, c, ccm, "default", m.name)
	}
	createService(t, c, groupService("default", "refused", "web", 82))
	waitEvent(t, c, ccm, "default", "refused", corev1.EventTypeWarning, "PolicyDenied", "listen port 82 is not allowed")
	after := float64(time.Now().Add(time.Second).UnixNano()) / 1e9
	waitCCM(t, ccm, time.Minute, func() (bool, error) { // two audits after the denial (every 2 s)
		last, err := metric(port, "hcloud_ccm_policy_audit_last_run_timestamp_seconds")
		if err != nil || last < after+2 {
			return false, fmt.Errorf("last audit at %v, want after %v (%w)", last, after+2, err)
		}
		return true, nil
	})
	waitMetric(t, ccm, port, "hcloud_ccm_policy_audit_load_balancers", 2)
	for _, name := range []string{"refused", "a", "b"} {
		if evs, err := events(c, "default", name, "PolicyViolation"); err != nil || len(evs) != 0 {
			t.Errorf("PolicyViolation events on %s: %d (%v), want none: the gate's PolicyDenied on the refused member reports it", name, len(evs), err)
		}
	}
}

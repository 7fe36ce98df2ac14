//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// Issue 28: the policy audit judges what exists. These tests run the CCM with the example
// policies of deploy/ in dry run and an audit every 2 s (--policy-audit-interval), so "within one
// audit" is a few seconds; the waits allow a minute for a loaded machine.

const auditInterval = "--policy-audit-interval=2s"

// The resources of the audit's reports.
var (
	policyReportsGVR        = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}
	clusterPolicyReportsGVR = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "clusterpolicyreports"}
)

// auditRun runs the CCM with the settings of lbEnv, an audit every 2 s and the unauthenticated
// metrics on a free port, which it returns.
func auditRun(t *testing.T) (ccmRun, int) {
	port := harness.FreePort(t)
	return ccmRun{
		env:  append(slices.Clone(lbEnv), "HCLOUD_METRICS_ENABLED=true", "HCLOUD_METRICS_ADDRESS=127.0.0.1:"+strconv.Itoa(port)),
		args: []string{auditInterval},
	}, port
}

// installPolicyReportCRDs installs the CRDs the chart renders with policyReports.enabled=true
// and waits until they are served.
func installPolicyReportCRDs(t *testing.T, c *harness.Cluster) {
	t.Helper()
	out := harness.Helm(t, "template", chartRelease, chartDir, "--namespace", ccmNamespace,
		"--set", "policyReports.enabled=true", "--show-only", "templates/policyreport-crds.yaml")
	path := filepath.Join(t.TempDir(), "crds.yaml")
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	c.ApplyFile(t, path)
	c.Kubectl(t, "wait", "--for=condition=established", "--timeout=60s",
		"crd/policyreports.wgpolicyk8s.io", "crd/clusterpolicyreports.wgpolicyk8s.io")
}

// reportResults returns the results of every PolicyReport as "namespace|policy|result|name of
// the Service", sorted.
func reportResults(dyn dynamic.Interface) ([]string, error) {
	list, err := dyn.Resource(policyReportsGVR).Namespace("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, item := range list.Items {
		results, _, _ := unstructured.NestedSlice(item.Object, "results")
		for _, r := range results {
			m, _ := r.(map[string]any)
			res, _ := m["resources"].([]any)
			if m["source"] != "hcloud-policy-ccm" || len(res) != 1 {
				return nil, fmt.Errorf("result %v: want source hcloud-policy-ccm and one resource", m)
			}
			svc, _ := res[0].(map[string]any)
			out = append(out, fmt.Sprintf("%s|%v|%v|%v", item.GetNamespace(), m["policy"], m["result"], svc["name"]))
		}
	}
	slices.Sort(out)
	return out, nil
}

// waitResults waits until the PolicyReports hold exactly want.
func waitResults(t *testing.T, ccm *harness.Process, dyn dynamic.Interface, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		got, err := reportResults(dyn)
		if err != nil {
			return false, err
		}
		if !slices.Equal(got, want) {
			return false, fmt.Errorf("PolicyReport results %q, want %q", got, want)
		}
		return true, nil
	})
}

// metric returns the value of the sample line of the metrics at port that starts with series
// (name and labels as exposed), or -1 when there is none.
func metric(port int, series string) (float64, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port)) //nolint:noctx // a test's scrape
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	return -1, sc.Err()
}

// waitMetric waits until the series has the value want.
func waitMetric(t *testing.T, ccm *harness.Process, port int, series string, want float64) {
	t.Helper()
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		got, err := metric(port, series)
		if err != nil {
			return false, fmt.Errorf("scrape %s: %w", series, err)
		}
		if got != want {
			return false, fmt.Errorf("%s = %v, want %v", series, got, want)
		}
		return true, nil
	})
}

// TestCCMAuditReportsExistingLoadBalancers: three load balancers exist (one lb11, two lb31) while
// the policy allows lb31 in every namespace. A revision that refuses lb31 outside labelled
// namespaces is loaded in dry run: within one audit the PolicyReport of the namespace lists
// exactly the two lb31 Services (code lb_type_needs_namespace_label, result fail), each gets a
// PolicyViolation event, the metric counts them, and no mutating request is sent. Fixing one
// Service removes its result; relaxing the policy removes the report.
func TestCCMAuditReportsExistingLoadBalancers(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id := oneWorker(t, "10.244.1.0/24")
	installPolicyReportCRDs(t, c)
	run, metricsPort := auditRun(t)
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), run)
	waitInitialised(t, c, ccm, "worker-1", id)
	applyPolicyData(t, c, ccm, func(config map[string]any) { config["large_load_balancer_types"] = []string{} })

	for name, typ := range map[string]string{"small": "lb11", "big": "lb31", "huge": "lb31"} {
		svc := loadBalancerService("default", name)
		svc.Spec.Ports[0].Port = 443 // port 80 alone draws a warning of the example policies
		svc.Annotations = map[string]string{annotationPrefix + "type": typ}
		created := createService(t, c, svc)
		waitLB(t, ccm, emu, created.UID, time.Minute, nil)
		waitIngress(t, c, ccm, "default", name)
	}
	waitMetric(t, ccm, metricsPort, "hcloud_ccm_policy_audit_load_balancers", 3)
	waitResults(t, ccm, dyn(t, c))
	emu.ResetRequests()

	applyPolicyData(t, c, ccm, func(config map[string]any) { config["large_load_balancer_types"] = []string{"lb31"} })
	waitResults(t, ccm, dyn(t, c), "default|lb_type_needs_namespace_label|fail|big", "default|lb_type_needs_namespace_label|fail|huge")
	waitMetric(t, ccm, metricsPort, `hcloud_ccm_policy_audit_violations{action="deny",code="lb_type_needs_namespace_label"}`, 2)
	for _, name := range []string{"big", "huge"} {
		waitEvent(t, c, ccm, "default", name, corev1.EventTypeWarning, "PolicyViolation", "lb_type_needs_namespace_label")
	}
	if n := emu.MutatingRequests(); n != 0 {
		t.Errorf("%d mutating requests after the revision and its audits, want 0: %v", n, emu.Counts())
	}
	if !strings.Contains(ccm.Logs(), `"audit":true`) {
		t.Errorf("no decision log line with \"audit\":true in the CCM's log")
	}

	updateService(t, c, "default", "huge", func(s *corev1.Service) { s.Annotations[annotationPrefix+"type"] = "lb11" })
	waitResults(t, ccm, dyn(t, c), "default|lb_type_needs_namespace_label|fail|big")

	applyPolicyData(t, c, ccm, func(config map[string]any) { config["large_load_balancer_types"] = []string{} })
	waitResults(t, ccm, dyn(t, c))
	waitMetric(t, ccm, metricsPort, `hcloud_ccm_policy_audit_violations{action="deny",code="lb_type_needs_namespace_label"}`, -1)
}

// TestCCMAuditGroupLimitLowered runs without the PolicyReport CRDs. Three members share the load
// balancer of group "web" under max_group_members 3; the limit is lowered to 2. The audit
// reports the third member (the newest): a PolicyViolation event group_too_many_members on it
// alone and the metric, with no mutating request; the CCM says once that it writes no
// PolicyReports and keeps running.
func TestCCMAuditGroupLimitLowered(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id := oneWorker(t, "10.244.1.0/24")
	run, metricsPort := auditRun(t)
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), run)
	waitInitialised(t, c, ccm, "worker-1", id)
	applyPolicyData(t, c, ccm, func(config map[string]any) {
		config["max_group_members"] = 3
		config["listen_ports"] = []int{81, 82, 443}
	})
	members := []struct { // oldest first; no port 80: alone it draws a warning
		name string
		port int32
	}{{"a", 443}, {"b", 81}, {"c", 82}}
	for _, m := range members {
		createService(t, c, groupService("default", m.name, "web", m.port))
		waitIngress(t, c, ccm, "default", m.name)
	}
	waitMetric(t, ccm, metricsPort, "hcloud_ccm_policy_audit_load_balancers", 3)
	emu.ResetRequests()

	applyPolicyData(t, c, ccm, func(config map[string]any) { config["max_group_members"] = 2 })
	waitMetric(t, ccm, metricsPort, `hcloud_ccm_policy_audit_violations{action="deny",code="group_too_many_members"}`, 1)
	waitEvent(t, c, ccm, "default", "c", corev1.EventTypeWarning, "PolicyViolation", "group_too_many_members")
	for _, name := range []string{"a", "b"} {
		if evs, err := events(c, "default", name, "PolicyViolation"); err != nil || len(evs) != 0 {
			t.Errorf("PolicyViolation events on default/%s: %d (%v), want none", name, len(evs), err)
		}
	}
	if n := emu.MutatingRequests(); n != 0 {
		t.Errorf("%d mutating requests after the revision and its audits, want 0: %v", n, emu.Counts())
	}
	if n := strings.Count(ccm.Logs(), "PolicyReports are not written"); n != 1 {
		t.Errorf("the CCM said %d times that it writes no PolicyReports, want once", n)
	}
	if exited, err := ccm.Exited(); exited {
		t.Errorf("the CCM exited without the CRDs: %v", err)
	}
}

// TestCCMAuditReportsExistingRoutes runs with HCLOUD_NETWORK and routes (deploy/networks, dry
// run). Two nodes have their routes; a revision that freezes worker-2's pod CIDR is loaded:
// within one audit the ClusterPolicyReport lists exactly that route (code frozen_route, the
// Node as the resource, the route in properties.route), with 0 mutating requests; the revision
// removed, the report goes.
func TestCCMAuditReportsExistingRoutes(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir+"/networks")
	installPolicyReportCRDs(t, c)
	emu, endpoint := hcloudemu.NewTestServer(t)
	netID, err := emu.AddNetwork(hcloudemu.NetworkSpec{Name: "k8s", IPRange: "10.0.0.0/8",
		Subnets: []hcloudemu.SubnetSpec{{IPRange: "10.0.0.0/16", NetworkZone: "eu-central"}}})
	if err != nil {
		t.Fatalf("add network: %v", err)
	}
	gateways := map[string]string{"worker-1": "10.0.0.2", "worker-2": "10.0.0.3"}
	for name, ip := range gateways {
		if _, err := emu.AddServer(hcloudemu.ServerSpec{Name: name, Networks: []hcloudemu.ServerNetwork{{NetworkID: netID, IP: ip}}}); err != nil {
			t.Fatalf("add server %s: %v", name, err)
		}
	}
	c.CreateNode(t, "worker-1", "10.244.1.0/24", harness.WithInternalIP(gateways["worker-1"]))
	c.CreateNode(t, "worker-2", "10.244.2.0/24", harness.WithInternalIP(gateways["worker-2"]))
	run, metricsPort := auditRun(t)
	run.deploy, run.env = deployDir+"/networks", append(run.env, "HCLOUD_NETWORK=k8s")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), run)
	waitCCM(t, ccm, 2*time.Minute, func() (bool, error) {
		network, _ := emu.Network(netID)
		if len(network.Routes) != 2 {
			return false, fmt.Errorf("routes %+v, want one per node", network.Routes)
		}
		return true, nil
	})
	waitMetric(t, ccm, metricsPort, "hcloud_ccm_policy_audit_routes", 2)
	emu.ResetRequests()

	updatePolicies(t, c, ccm, func(data map[string]string) {
		data["freeze.rego"] = `package ccm

deny contains {"msg": "worker-2's pod CIDR is frozen", "code": "frozen_route"} if {
	input.action == "route.create"
	input.route.destination == "10.244.2.0/24"
}
`
	})
	want := "frozen_route|fail|Node/worker-2|10.244.2.0/24 via 10.0.0.3"
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		got, err := clusterResults(dyn(t, c))
		if err != nil {
			return false, err
		}
		if !slices.Equal(got, []string{want}) {
			return false, fmt.Errorf("ClusterPolicyReport results %q, want %q", got, want)
		}
		return true, nil
	})
	if n := emu.MutatingRequests(); n != 0 {
		t.Errorf("%d mutating requests after the revision and its audits, want 0: %v", n, emu.Counts())
	}

	updatePolicies(t, c, ccm, func(data map[string]string) { delete(data, "freeze.rego") })
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		got, err := clusterResults(dyn(t, c))
		if err != nil {
			return false, err
		}
		if len(got) != 0 {
			return false, fmt.Errorf("ClusterPolicyReport results %q, want none", got)
		}
		return true, nil
	})
}

// clusterResults returns the results of the ClusterPolicyReports as "policy|result|kind/name of
// the resource|route".
func clusterResults(d dynamic.Interface) ([]string, error) {
	list, err := d.Resource(clusterPolicyReportsGVR).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, item := range list.Items {
		results, _, _ := unstructured.NestedSlice(item.Object, "results")
		for _, r := range results {
			m, _ := r.(map[string]any)
			res, _ := m["resources"].([]any)
			props, _ := m["properties"].(map[string]any)
			if len(res) != 1 {
				return nil, fmt.Errorf("result %v: want one resource", m)
			}
			node, _ := res[0].(map[string]any)
			out = append(out, fmt.Sprintf("%v|%v|%v/%v|%v", m["policy"], m["result"], node["kind"], node["name"], props["route"]))
		}
	}
	return out, nil
}

// dyn is a dynamic client of the cluster admin.
func dyn(t *testing.T, c *harness.Cluster) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/robotemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// robotServer is the dedicated server of the Robot tests.
var robotServer = robotemu.Server{Number: 321, Name: "bm-1", IP: "203.0.113.50", IPv6Net: "2001:db8:0:50::", Product: "AX41-NVMe", DC: "FSN1-DC16"}

// mixedCluster is a cluster with one cloud node (worker-1) and one Robot node (bm-1), and the
// CCM started with the official CCM's Robot settings.
type mixedCluster struct {
	c       *harness.Cluster
	emu     *hcloudemu.Emulator
	robot   *robotemu.Emulator
	ccm     *harness.Process
	cloudID int64
}

// startMixedCluster starts the cluster, both emulators and the CCM. The Robot credentials
// reach the CCM as in a pod: the Secret hcloud holds them under the official CCM's keys
// robot-user and robot-password, and the CCM's environment is resolved from the
// secretKeyRefs of the Deployment that deploy/ renders. extraEnv is appended.
func startMixedCluster(t *testing.T, extraEnv ...string) mixedCluster {
	t.Helper()
	return startMixed(t, []robotemu.Server{robotServer}, ccmRun{env: extraEnv})
}

// startMixed is startMixedCluster with the given Robot servers (each registered as a node
// with InternalIP 10.1.0.<i+5>) and extra args and env for the CCM.
func startMixed(t *testing.T, robots []robotemu.Server, run ccmRun) mixedCluster {
	t.Helper()
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	emu, endpoint := hcloudemu.NewTestServer(t)
	robot, robotEndpoint := robotemu.NewTestServer(t, robotemu.Seed{Servers: robots})
	cloudID := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-1", Type: "cx22", Location: "fsn1"})

	if _, err := c.Client().CoreV1().Secrets(ccmNamespace).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ccmNamespace, Name: "hcloud"},
		StringData: map[string]string{"token": emu.Token(), "robot-user": robot.User(), "robot-password": robot.Password()},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Secret hcloud: %v", err)
	}
	d := render(t, deployDir).deployment
	env := append(secretEnv(t, c, d, "ROBOT_USER", "ROBOT_PASSWORD"), lbEnv...)
	env = append(env, "ROBOT_ENABLED=true", "ROBOT_ENDPOINT="+robotEndpoint)

	c.CreateNode(t, "worker-1", "10.244.1.0/24")
	for i, r := range robots {
		c.CreateNode(t, r.Name, fmt.Sprintf("10.244.%d.0/24", i+2), harness.WithInternalIP(fmt.Sprintf("10.1.0.%d", i+5)))
	}
	run.env = append(env, run.env...)
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), run)
	return mixedCluster{c: c, emu: emu, robot: robot, ccm: ccm, cloudID: cloudID}
}

// secretEnv resolves the named variables of d's container from their secretKeyRefs, as the
// kubelet does, and returns them as KEY=value.
func secretEnv(t *testing.T, c *harness.Cluster, d *appsv1.Deployment, names ...string) []string {
	t.Helper()
	var out []string
	for _, name := range names {
		ev := envByName(d.Spec.Template.Spec.Containers[0].Env, name)
		if ev == nil || ev.ValueFrom == nil || ev.ValueFrom.SecretKeyRef == nil {
			t.Fatalf("the Deployment of %s has no secretKeyRef for %s: %+v", deployDir, name, ev)
		}
		ref := ev.ValueFrom.SecretKeyRef
		s, err := c.Client().CoreV1().Secrets(ccmNamespace).Get(context.Background(), ref.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("Secret %s of %s: %v", ref.Name, name, err)
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			t.Fatalf("Secret %s has no key %s (for %s)", ref.Name, ref.Key, name)
		}
		out = append(out, name+"="+string(v))
	}
	return out
}

// waitRobotInitialised waits until node name has the provider ID of Robot server n and no
// uninitialized taint.
func waitRobotInitialised(t *testing.T, c *harness.Cluster, ccm *harness.Process, name string, n int) *corev1.Node {
	t.Helper()
	return waitProviderID(t, c, ccm, name, fmt.Sprintf("hrobot://%d", n))
}

// TestCCMRobotMixedCluster: with ROBOT_ENABLED=true and the credentials from the official
// CCM's Secret keys, a cluster of a cloud server and a Robot dedicated server initialises:
// the cloud node as before, the Robot node with hrobot://<n>, the product as instance type,
// the lower-cased data centre as zone and its prefix as region, provided-by=robot, and the
// server's IPv4 as ExternalIP next to the kubelet's InternalIP (ROBOT_FORWARD_INTERNAL_IPS
// defaults to true). The Robot list is read once for both nodes (cache).
func TestCCMRobotMixedCluster(t *testing.T) {
	t.Parallel()
	m := startMixedCluster(t)
	cloud := waitInitialised(t, m.c, m.ccm, "worker-1", m.cloudID)
	if got := cloud.Labels["instance.hetzner.cloud/provided-by"]; got != "cloud" {
		t.Errorf("worker-1 provided-by = %q, want cloud", got)
	}
	bm := waitRobotInitialised(t, m.c, m.ccm, robotServer.Name, robotServer.Number)
	wantLabels := map[string]string{
		corev1.LabelInstanceTypeStable:       "AX41-NVMe",
		corev1.LabelTopologyZone:             "fsn1-dc16",
		corev1.LabelTopologyRegion:           "fsn1",
		"instance.hetzner.cloud/provided-by": "robot",
	}
	for k, v := range wantLabels {
		if got := bm.Labels[k]; got != v {
			t.Errorf("bm-1 label %s = %q, want %q", k, got, v)
		}
	}
	harness.WaitFor(t, time.Minute, func() (bool, error) {
		n, err := m.c.Client().CoreV1().Nodes().Get(context.Background(), robotServer.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		want := []string{"ExternalIP " + robotServer.IP, "Hostname bm-1", "InternalIP 10.1.0.5"}
		var got []string
		for _, a := range n.Status.Addresses {
			got = append(got, string(a.Type)+" "+a.Address)
		}
		if slices.Sort(got); !slices.Equal(got, want) {
			return false, fmt.Errorf("bm-1 addresses %v, want %v", n.Status.Addresses, want)
		}
		return true, nil
	})
	if n := m.robot.Requests()["GET /server"]; n < 1 || n > 2 {
		t.Errorf("GET /server = %d, want 1 or 2 (one list per ROBOT_CACHE_TIMEOUT, plus at most one forced refresh)", n)
	}
	if n := m.robot.Requests()["GET /server/{n}"]; n != 0 {
		t.Errorf("GET /server/{n} = %d, want 0 (lookups are served from the cached list)", n)
	}
}

// TestChartRobotEnabled: the chart maps robot.enabled=true to ROBOT_ENABLED=true as the
// official chart does, and reads the credentials from the official Secret keys; the kustomize
// base reads the same keys.
func TestChartRobotEnabled(t *testing.T) {
	t.Parallel()
	r := renderChart(t, []string{officialDefaults}, "--set", "robot.enabled=true")
	env := r.deployment.Spec.Template.Spec.Containers[0].Env
	if ev := envByName(env, "ROBOT_ENABLED"); ev == nil || ev.Value != "true" {
		t.Errorf("ROBOT_ENABLED = %+v, want \"true\"", ev)
	}
	base := render(t, deployDir).deployment.Spec.Template.Spec.Containers[0].Env
	for _, e := range []struct{ name, key string }{{"ROBOT_USER", "robot-user"}, {"ROBOT_PASSWORD", "robot-password"}} {
		for what, env := range map[string][]corev1.EnvVar{"chart": env, "kustomize": base} {
			ev := envByName(env, e.name)
			if ev == nil || ev.ValueFrom == nil || ev.ValueFrom.SecretKeyRef == nil ||
				ev.ValueFrom.SecretKeyRef.Name != "hcloud" || ev.ValueFrom.SecretKeyRef.Key != e.key {
				t.Errorf("%s: %s = %+v, want Secret hcloud key %s", what, e.name, ev, e.key)
			}
		}
	}
	if ev := envByName(base, "ROBOT_ENABLED"); ev != nil {
		t.Errorf("kustomize: ROBOT_ENABLED = %+v, want unset (Robot is opt-in)", ev)
	}
}

// ipTargets returns the IP targets of lb, sorted.
func ipTargets(lb schema.LoadBalancer) []string {
	var out []string
	for _, t := range lb.Targets {
		if t.Type == "ip" && t.IP != nil {
			out = append(out, t.IP.IP)
		}
	}
	slices.Sort(out)
	return out
}

// TestCCMRobotLoadBalancerIPTarget: in a mixed cluster, the load balancer of a Service has the
// cloud node as server target and the Robot node as IP target on its Robot server_ip, and the
// policy input of that add_target names the IP target.
func TestCCMRobotLoadBalancerIPTarget(t *testing.T) {
	t.Parallel()
	m := startMixedCluster(t)
	waitInitialised(t, m.c, m.ccm, "worker-1", m.cloudID)
	waitRobotInitialised(t, m.c, m.ccm, robotServer.Name, robotServer.Number)

	svc := createService(t, m.c, loadBalancerService("default", "web"))
	waitLB(t, m.ccm, m.emu, svc.UID, 2*time.Minute, func(lb schema.LoadBalancer) error {
		if got := targetServers(lb); !slices.Equal(got, []int64{m.cloudID}) {
			return fmt.Errorf("server targets %v, want [%d]", got, m.cloudID)
		}
		if got := ipTargets(lb); !slices.Equal(got, []string{robotServer.IP}) {
			return fmt.Errorf("IP targets %v, want [%s] (the Robot node)", got, robotServer.IP)
		}
		return nil
	})
	waitIngress(t, m.c, m.ccm, "default", "web")
}

// TestCCMRobotDenyIPTargets: a policy that denies adding IP targets stops the whole plan of a
// Service whose nodes include a Robot node: a PolicyDenied event, no load balancer and no
// mutating request in the cloud.
func TestCCMRobotDenyIPTargets(t *testing.T) {
	t.Parallel()
	m := startMixed(t, []robotemu.Server{robotServer}, ccmRun{args: []string{enforce}})
	waitInitialised(t, m.c, m.ccm, "worker-1", m.cloudID)
	waitRobotInitialised(t, m.c, m.ccm, robotServer.Name, robotServer.Number)
	updatePolicies(t, m.c, m.ccm, func(data map[string]string) {
		data["robot_targets.rego"] = `package ccm

deny contains {"msg": msg, "code": "no_robot_targets"} if {
	input.operation == "add_target"
	input.target.type == "ip"
	msg := sprintf("dedicated servers may not receive load balancer traffic (%s)", [input.target.ip])
}
`
	})
	m.emu.ResetRequests()

	svc := createService(t, m.c, loadBalancerService("default", "web"))
	waitEvent(t, m.c, m.ccm, "default", svc.Name, corev1.EventTypeWarning, "PolicyDenied", "dedicated servers may not receive load balancer traffic ("+robotServer.IP+")")
	quiet(t, m.emu, 3*time.Second, 30*time.Second)
	if n := m.emu.MutatingRequests(); n != 0 {
		t.Errorf("%d mutating Hetzner requests after a deny, want 0: %v", n, m.emu.Counts())
	}
	if lbs := m.emu.LoadBalancers(); len(lbs) != 0 {
		t.Errorf("%d load balancers after a deny, want 0", len(lbs))
	}
}

// TestCCMRobotNodeLifecycle runs the cloud-node-lifecycle controller (--node-monitor-period=1s,
// ROBOT_CACHE_TIMEOUT=1s) on NotReady Robot nodes: a server whose reset status is "shut off"
// gets the shutdown taint and is kept; a server gone from the Robot account is deleted.
func TestCCMRobotNodeLifecycle(t *testing.T) {
	t.Parallel()
	off := robotemu.Server{Number: 401, Name: "bm-off", IP: "203.0.113.61", DC: "FSN1-DC16"}
	gone := robotemu.Server{Number: 402, Name: "bm-gone", IP: "203.0.113.62", DC: "FSN1-DC16"}
	m := startMixed(t, []robotemu.Server{off, gone}, ccmRun{args: []string{"--node-monitor-period=1s"}, env: []string{"ROBOT_CACHE_TIMEOUT=1s"}})
	waitRobotInitialised(t, m.c, m.ccm, off.Name, off.Number)
	waitRobotInitialised(t, m.c, m.ccm, gone.Name, gone.Number)

	if err := m.robot.SetOperatingStatus(off.Number, "shut off"); err != nil {
		t.Fatal(err)
	}
	if err := m.robot.RemoveServer(gone.Number); err != nil {
		t.Fatal(err)
	}
	setNodeReady(t, m.c, off.Name, corev1.ConditionUnknown)
	setNodeReady(t, m.c, gone.Name, corev1.ConditionUnknown)
	nodes := m.c.Client().CoreV1().Nodes()
	ctx := context.Background()
	waitCCM(t, m.ccm, time.Minute, func() (bool, error) {
		n, err := nodes.Get(ctx, off.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s: %v (want it kept)", off.Name, err)
		}
		if !slices.ContainsFunc(n.Spec.Taints, func(taint corev1.Taint) bool { return taint.Key == taintShutdown }) {
			return false, fmt.Errorf("node %s taints %v, want %s", off.Name, n.Spec.Taints, taintShutdown)
		}
		if _, err := nodes.Get(ctx, gone.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("node %s of the removed Robot server still exists (%w)", gone.Name, err)
		}
		return true, nil
	})
	if n := m.robot.Requests()["GET /reset/{n}"]; n > 5 {
		t.Errorf("GET /reset/{n} = %d, want at most a few (answers are reused for a minute)", n)
	}
}

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// TestCCMPolicyReload changes the policy ConfigMap of deploy/ under a running CCM and proves
// that decisions follow it live, without a restart:
//
//   - data.json changed so that lb21 is no longer allowed, then the type annotation set to
//     lb21: Warning event PolicyDenied on the Service, the load balancer untouched (still lb11,
//     zero mutating requests);
//   - data.json restored: the service controller's retry converges (lb21, same load balancer),
//     by the same CCM process;
//   - a rego file that does not parse added: Warning event PolicyRejected on the ConfigMap, and
//     the last good revision stays in force (lb31 in an unlabelled namespace is still denied by
//     it, the load balancer stays lb21);
//   - a rego file that reads a misspelt input field (input.route.destinaton): rejected the same
//     way, the event names file, line and the field it could have meant.
func TestCCMPolicyReload(t *testing.T) {
	t.Parallel()
	c, emu, ccm := startOneWorker(t, ccmRun{env: lbEnv, args: []string{enforce}})

	const ns, name = "default", "web"
	svc := createService(t, c, loadBalancerService(ns, name))
	lb := waitLB(t, ccm, emu, svc.UID, time.Minute, nil)
	lbID := lb.ID
	if got := lb.LoadBalancerType.Name; got != "lb11" {
		t.Fatalf("load balancer type = %q, want lb11", got)
	}
	waitIngress(t, c, ccm, ns, name)
	original := getConfigMap(t, c)

	// wantType returns a load balancer condition: the same load balancer, of type typ.
	wantType := func(typ string) func(schema.LoadBalancer) error {
		return func(lb schema.LoadBalancer) error {
			if lb.ID != lbID {
				t.Fatalf("load balancer of %s/%s is %d, want the same %d", ns, name, lb.ID, lbID)
			}
			if lb.LoadBalancerType.Name != typ {
				return fmt.Errorf("type %q, want %q", lb.LoadBalancerType.Name, typ)
			}
			return nil
		}
	}
	// denied sets the type annotation to typ and waits for a PolicyDenied event containing msg;
	// nothing may change in the cloud meanwhile.
	denied := func(t *testing.T, typ, msg string) {
		t.Helper()
		before := emu.LoadBalancers()
		emu.ResetRequests()
		updateService(t, c, ns, name, func(s *corev1.Service) { s.Annotations[annotationPrefix+"type"] = typ })
		waitEvent(t, c, ccm, ns, name, corev1.EventTypeWarning, "PolicyDenied", msg)
		if n := emu.MutatingRequests(); n != 0 {
			t.Errorf("%d mutating requests after a deny, want 0: %v", n, emu.Counts())
		}
		if after := emu.LoadBalancers(); len(after) != 1 || after[0].ID != lbID || after[0].LoadBalancerType.Name != before[0].LoadBalancerType.Name {
			t.Errorf("load balancers after a deny: %v of type %v, want %d unchanged (%s)",
				lbNames(after), lbTypes(after), lbID, before[0].LoadBalancerType.Name)
		}
	}

	t.Run("deny by a data change", func(t *testing.T) {
		applyPolicyData(t, c, ccm, func(config map[string]any) {
			config["load_balancer_types"] = []string{"lb11", "lb31"}
		})
		denied(t, "lb21", `load balancer type "lb21" is not allowed`)
	})
	if t.Failed() {
		t.FailNow()
	}

	var good string // the revision in force after the fix
	t.Run("fixed without a restart", func(t *testing.T) {
		pid := ccm.Pid()
		good = updatePolicies(t, c, ccm, func(data map[string]string) {
			data["data.json"] = original.Data["data.json"]
		})
		// No touch of the Service: the service controller's retry (5 s, 10 s, ... backoff)
		// meets the new revision.
		waitLB(t, ccm, emu, svc.UID, time.Minute, wantType("lb21"))
		if ccm.Pid() != pid {
			t.Errorf("the CCM was restarted (pid %d, was %d)", ccm.Pid(), pid)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("broken revision keeps the last good", func(t *testing.T) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cm := getConfigMap(t, c)
			cm.Data["broken.rego"] = "package ccm\n\ndeny contains msg if {\n\tmsg := \"unterminated\"\n"
			_, err := c.Client().CoreV1().ConfigMaps(ccmNamespace).Update(context.Background(), cm, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("update configmap: %v", err)
		}
		ev := waitEvent(t, c, ccm, ccmNamespace, policyConfigMap, corev1.EventTypeWarning, "PolicyRejected", "broken.rego")
		t.Logf("PolicyRejected: %s", ev.Message)
		if want := "revision " + good + " stays in force"; !strings.Contains(ev.Message, want) {
			t.Errorf("PolicyRejected message %q does not say %q", ev.Message, want)
		}
		if rev, _ := policyRevision(ccm); rev != good {
			t.Errorf("revision in force %q, want the last good %q", rev, good)
		}
		// The last good revision (the examples) denies lb31 in a namespace without the label;
		// an engine without policies would allow it, a failing one would deny with another
		// message.
		denied(t, "lb31", `load balancer type "lb31" needs the namespace "default" to be labelled`)
		waitLB(t, ccm, emu, svc.UID, time.Second, wantType("lb21"))
	})

	t.Run("misspelt input field is rejected like a parse error", func(t *testing.T) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cm := getConfigMap(t, c)
			delete(cm.Data, "broken.rego")
			cm.Data["typo.rego"] = "package ccm\n\ndeny contains \"x\" if input.route.destinaton == \"0.0.0.0/0\"\n"
			_, err := c.Client().CoreV1().ConfigMaps(ccmNamespace).Update(context.Background(), cm, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("update configmap: %v", err)
		}
		ev := waitEvent(t, c, ccm, ccmNamespace, policyConfigMap, corev1.EventTypeWarning, "PolicyRejected", "typo.rego")
		t.Logf("PolicyRejected: %s", ev.Message)
		for _, want := range []string{"revision " + good + " stays in force", "typo.rego:3:22: rego_type_error",
			`input.route has no field "destinaton"; did you mean "destination"?`} { //nolint:misspell // the misspelling is what is tested
			if !strings.Contains(ev.Message, want) {
				t.Errorf("PolicyRejected message %q does not say %q", ev.Message, want)
			}
		}
		if rev, _ := policyRevision(ccm); rev != good {
			t.Errorf("revision in force %q, want the last good %q", rev, good)
		}
	})
}

// TestCCMPolicyDryRun runs the CCM with the Deployment's args as shipped (--policy-mode=dryrun,
// the swap-safe default) and proves that a load balancer the example policies deny (public, in a
// namespace that may not expose one) is created anyway, with a Warning event PolicyDryRunDenied
// on the Service naming the deny.
func TestCCMPolicyDryRun(t *testing.T) {
	t.Parallel()
	if args := render(t, deployDir).deployment.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--policy-mode=dryrun") {
		t.Fatalf("the Deployment's args %v do not pass --policy-mode=dryrun: the swap-safe default is gone", args)
	}
	c, emu, ccm := startOneWorker(t, ccmRun{env: lbEnv})
	if want := `"Policy gate enabled" mode="dryrun"`; !strings.Contains(ccm.Logs(), want) {
		t.Fatalf("%s did not log %s: the shipped --policy-mode=dryrun is not in force", ccm.Name, want)
	}

	ctx := context.Background()
	if _, err := c.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	svc := createService(t, c, loadBalancerService("shop", "web"))
	lb := waitLB(t, ccm, emu, svc.UID, time.Minute, nil)
	ingress := waitIngress(t, c, ccm, "shop", "web")
	if ips := ingressIPs(ingress); !slices.Contains(ips, lb.PublicNet.IPv4.IP) {
		t.Errorf("service ingress IPs %v, want the load balancer's IPv4 %s", ips, lb.PublicNet.IPv4.IP)
	}
	waitEvent(t, c, ccm, "shop", "web", corev1.EventTypeWarning, "PolicyDryRunDenied", `namespace "shop" may not expose load balancers publicly`)
	if evs, err := events(c, "shop", "web", "PolicyDenied"); err != nil || len(evs) != 0 {
		t.Errorf("PolicyDenied events in dry run: %d (%v), want none", len(evs), err)
	}
}

// getConfigMap returns the policy ConfigMap of deploy/.
func getConfigMap(t *testing.T, c *harness.Cluster) *corev1.ConfigMap {
	t.Helper()
	cm, err := c.Client().CoreV1().ConfigMaps(ccmNamespace).Get(context.Background(), policyConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get configmap %s/%s: %v", ccmNamespace, policyConfigMap, err)
	}
	return cm
}

// policyLoadedLog is the CCM's log line of a revision that came into force.
var policyLoadedLog = regexp.MustCompile(`"Policy revision loaded" revision="([0-9a-f]+)"`)

// policyRevision returns the revision the CCM loaded last, from its log ("" for none), and the
// number of revisions it loaded so far.
func policyRevision(ccm *harness.Process) (string, int) {
	m := policyLoadedLog.FindAllStringSubmatch(ccm.Logs(), -1)
	if len(m) == 0 {
		return "", 0
	}
	return m[len(m)-1][1], len(m)
}

// updatePolicies applies mutate to the policy ConfigMap's data, waits until the CCM has loaded
// the new revision (its log), checks the Normal event PolicyLoaded naming that revision on the
// ConfigMap, and returns the revision.
func updatePolicies(t *testing.T, c *harness.Cluster, ccm *harness.Process, mutate func(map[string]string)) string {
	t.Helper()
	_, loaded := policyRevision(ccm)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := getConfigMap(t, c)
		mutate(cm.Data)
		_, err := c.Client().CoreV1().ConfigMaps(ccmNamespace).Update(context.Background(), cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update configmap %s/%s: %v", ccmNamespace, policyConfigMap, err)
	}
	var rev string
	waitCCM(t, ccm, 30*time.Second, func() (bool, error) {
		var n int
		rev, n = policyRevision(ccm)
		return n > loaded, fmt.Errorf("%s has not loaded a new policy revision (%d loaded so far)", ccm.Name, n)
	})
	waitEvent(t, c, ccm, ccmNamespace, policyConfigMap, corev1.EventTypeNormal, "PolicyLoaded", "Policy revision "+rev+" loaded")
	return rev
}

// applyPolicyData changes the "config" object of the policy ConfigMap's data.json and waits
// for the CCM to load it.
func applyPolicyData(t *testing.T, c *harness.Cluster, ccm *harness.Process, mutate func(config map[string]any)) string {
	t.Helper()
	return updatePolicies(t, c, ccm, func(data map[string]string) {
		var doc map[string]map[string]any
		if err := json.Unmarshal([]byte(data["data.json"]), &doc); err != nil {
			t.Fatalf("data.json of the policy ConfigMap: %v", err)
		}
		mutate(doc["config"])
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			t.Fatalf("marshal data.json: %v", err)
		}
		data["data.json"] = string(b)
	})
}

// lbTypes lists the types of lbs, for messages.
func lbTypes(lbs []schema.LoadBalancer) []string {
	var out []string
	for _, lb := range lbs {
		out = append(out, lb.LoadBalancerType.Name)
	}
	return out
}

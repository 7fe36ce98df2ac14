//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// quotaPolicy denies a load balancer create in a namespace that already has its quota of load
// balancers in input.inventory: data.config.load_balancer_quota per namespace, else
// data.config.default_load_balancer_quota.
const quotaPolicy = `package ccm

deny contains {"msg": msg, "code": "load_balancer_quota"} if {
	input.action == "loadbalancer.create"
	ns := input.service.namespace
	quota := object.get(data.config.load_balancer_quota, ns, data.config.default_load_balancer_quota)
	have := object.get(input.inventory.namespaces, [ns, "load_balancers"], 0)
	have >= quota
	msg := sprintf("namespace %s has %d load balancers, its quota is %d", [ns, have, quota])
}
`

const quotaData = `{"config": {"load_balancer_quota": {"team-a": 3}, "default_load_balancer_quota": 1}}`

// TestCCMQuotas runs a load balancer quota over input.inventory in enforce, with four Service
// syncs at once (--concurrent-service-syncs=4), so that the serialisation of creates is what
// keeps the quota:
//
//   - team-a (quota 3): three Services get their load balancers, the fourth is denied; deleting
//     one of the three gives the fourth its load balancer (the delete retries the denied
//     Services at once: requeue trigger "inventory"; waited for by polling);
//   - ten rounds, each in a namespace of quota 1 with its one slot left: two Services created
//     at once, exactly one gets a load balancer and the other is denied.
func TestCCMQuotas(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{"quota.rego": quotaPolicy, "data.json": quotaData} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, emu, endpoint, id := oneWorker(t, "10.244.1.0/24")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{
		// The quota policy instead of deploy/'s ConfigMap: one policy source only.
		args: []string{"--policy-configmap=", "--policy-dir=" + dir, enforce, "--concurrent-service-syncs=4"},
		env:  lbEnv,
	})
	waitInitialised(t, c, ccm, "worker-1", id)

	createNamespace(t, c, "team-a")
	var web []*corev1.Service
	for i := 1; i <= 3; i++ {
		web = append(web, createService(t, c, loadBalancerService("team-a", fmt.Sprintf("web-%d", i))))
	}
	for _, svc := range web {
		waitIngress(t, c, ccm, svc.Namespace, svc.Name)
	}
	fourth := createService(t, c, loadBalancerService("team-a", "web-4"))
	waitEvent(t, c, ccm, "team-a", "web-4", corev1.EventTypeWarning, "PolicyDenied", "namespace team-a has 3 load balancers, its quota is 3")
	if n := len(namespaceLBs(emu, c, "team-a")); n != 3 {
		t.Fatalf("team-a has %d load balancers with web-4 denied, want 3", n)
	}
	deleted := time.Now()
	if err := c.Client().CoreV1().Services("team-a").Delete(context.Background(), "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitIngress(t, c, ccm, "team-a", "web-4")
	t.Logf("team-a/web-4 got its load balancer %v after web-1 was deleted (a figure, not a bound)", time.Since(deleted).Round(10*time.Millisecond))
	if want := `"Retrying a denied Service now: the policy input changed" service="team-a/web-4" cause="load balancer `; !strings.Contains(ccm.Logs(), want) {
		t.Errorf("%s did not retry team-a/web-4 when the delete made room (no log line %s...)", ccm.Name, want)
	}
	if got := namespaceLBs(emu, c, "team-a"); len(got) != 3 || got[fourth.UID] != 1 || got[web[1].UID] != 1 || got[web[2].UID] != 1 || len(emu.LoadBalancers()) != 3 {
		t.Errorf("team-a's load balancers by Service UID = %v of %d in all, want web-2, web-3 and web-4 one each and no other", got, len(emu.LoadBalancers()))
	}

	for round := range 10 {
		ns := fmt.Sprintf("race-%d", round)
		createNamespace(t, c, ns)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, name := range []string{"a", "b"} {
			wg.Go(func() {
				_, errs[i] = c.Client().CoreV1().Services(ns).Create(context.Background(), loadBalancerService(ns, name), metav1.CreateOptions{})
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: create the Services: %v", round, err)
		}
		created, denied := settleRace(t, c, ccm, ns)
		if created != 1 || denied != 1 || len(namespaceLBs(emu, c, ns)) != 1 {
			t.Errorf("round %d: %d Services with an address, %d denied, %d load balancers; want exactly one created", round, created, denied, len(namespaceLBs(emu, c, ns)))
		}
	}
}

// createNamespace creates the namespace name.
func createNamespace(t *testing.T, c *harness.Cluster, name string) {
	t.Helper()
	if _, err := c.Client().CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// settleRace waits until both Services a and b of ns are settled, each with an address or a
// PolicyDenied event of the quota, and returns how many of each.
func settleRace(t *testing.T, c *harness.Cluster, ccm *harness.Process, ns string) (created, denied int) {
	t.Helper()
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		created, denied = 0, 0
		for _, name := range []string{"a", "b"} {
			svc, err := c.Client().CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if len(svc.Status.LoadBalancer.Ingress) > 0 {
				created++
				continue
			}
			evs, err := events(c, ns, name, "PolicyDenied")
			if err != nil {
				return false, err
			}
			for _, ev := range evs {
				if strings.Contains(ev.Message, "its quota is 1") {
					denied++
					break
				}
			}
		}
		return created+denied == 2, fmt.Errorf("%s: %d created, %d denied of 2", ns, created, denied)
	})
	return created, denied
}

// namespaceLBs counts the load balancers of the Services of ns in the emulator, by Service UID.
func namespaceLBs(emu *hcloudemu.Emulator, c *harness.Cluster, ns string) map[types.UID]int {
	svcs, err := c.Client().CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{})
	out := map[types.UID]int{}
	if err != nil {
		return out
	}
	uids := map[string]types.UID{}
	for _, s := range svcs.Items {
		uids[string(s.UID)] = s.UID
	}
	for _, lb := range emu.LoadBalancers() {
		if uid, ok := uids[lb.Labels["hcloud-ccm/service-uid"]]; ok {
			out[uid]++
		}
	}
	return out
}

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// countingProxy forwards to the emulator at endpoint and counts the requests that pass, so
// that one process's requests are counted apart from another's against the same emulator.
type countingProxy struct {
	URL string

	mu       sync.Mutex
	mutating []string // "METHOD path" of every request that is not a GET
	reads    int
}

func newCountingProxy(t *testing.T, endpoint string) *countingProxy {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host}) // the path is the request's
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		if r.Method == http.MethodGet {
			p.reads++
		} else {
			p.mutating = append(p.mutating, r.Method+" "+r.URL.Path)
		}
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL + target.Path
	return p
}

// counts returns the mutating requests seen so far and the number of reads.
func (p *countingProxy) counts() ([]string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.mutating), p.reads
}

// TestCCMOnlyTheLeaderWrites (issue 40 §1): a replica that serves only the admission webhook
// beside the leader, with short group sweep, drift and audit intervals, never writes: 0
// mutating Hetzner requests (counted apart through a proxy of its own), the load balancer of a
// group without members that its sweep would delete stays, no audit runs (no PolicyViolation
// event, no PolicyReport write). The leader runs none of those loops here (its intervals are
// 0), so whatever is written comes from the replica. When the leader stops, the replica takes
// the Lease over and then, as the leader, its sweep deletes that load balancer.
//
// Without the fix the replica's sweep deleted the load balancer within a few seconds and its
// audit ran at start (issue 40 §1).
func TestCCMOnlyTheLeaderWrites(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id := oneWorker(t, "10.244.1.0/24")
	leader, _ := startCCM(t, c, "ccm-leader", endpoint, emu.Token(), ccmRun{env: lbEnv, args: append(slices.Clone(fastElection),
		"--load-balancer-group-sweep-interval=0", "--policy-audit-interval=0", "--load-balancer-drift-interval=0")})
	waitInitialised(t, c, leader, "worker-1", id)
	waitCCM(t, leader, time.Minute, func() (bool, error) {
		return strings.Contains(leader.Logs(), acquired), fmt.Errorf("%s has not acquired the Lease yet", leader.Name)
	})

	orphan, err := emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: "kubernetes-group-ghost", Labels: map[string]string{
		lbplan.LabelGroup: "ghost", lbplan.LabelCluster: "kubernetes", lbplan.LabelGroupNamespace: "default",
	}})
	if err != nil {
		t.Fatal(err)
	}

	proxy := newCountingProxy(t, endpoint)
	replica := startWebhookReplica(t, c, proxy.URL, emu.Token(), "--load-balancer-group-sweep-interval=2s",
		"--policy-audit-interval=2s", "--load-balancer-drift-interval=2s")
	// Three sweep, drift and audit periods of the replica.
	time.Sleep(8 * time.Second)
	if exited, err := replica.Exited(); exited {
		t.Fatalf("%s exited: %v\n%s", replica.Name, err, replica.Tail(30))
	}
	mutating, reads := proxy.counts()
	t.Logf("%s, not leading, sent %d reads and %d mutating requests", replica.Name, reads, len(mutating))
	if len(mutating) != 0 {
		t.Errorf("%s does not lead and sent mutating requests: %v", replica.Name, mutating)
	}
	if _, ok := emu.LoadBalancer(orphan); !ok {
		t.Errorf("the load balancer of group ghost (no members) was deleted while only the non-leading replica sweeps")
	}
	for _, line := range []string{"Leading: starting the loops that write", "Policy audit", "Syncing a Service now", "Retrying a denied Service now"} {
		if strings.Contains(replica.Logs(), line) {
			t.Errorf("%s does not lead and logged %q", replica.Name, line)
		}
	}
	if evs, err := c.Client().CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=PolicyViolation"}); err != nil {
		t.Fatal(err)
	} else if len(evs.Items) != 0 {
		t.Errorf("%d PolicyViolation events, want none (only the non-leading replica has an audit interval)", len(evs.Items))
	}

	leader.Stop()
	t.Logf("stopped %s with SIGTERM", leader.Name)
	waitCCM(t, replica, time.Minute, func() (bool, error) {
		return strings.Contains(replica.Logs(), acquired), fmt.Errorf("%s has not taken the Lease over yet", replica.Name)
	})
	waitCCM(t, replica, time.Minute, func() (bool, error) {
		_, ok := emu.LoadBalancer(orphan)
		return !ok, fmt.Errorf("%s leads and its sweep has not deleted the load balancer of group ghost yet", replica.Name)
	})
	mutating, _ = proxy.counts()
	if !slices.Contains(mutating, fmt.Sprintf("DELETE /v1/load_balancers/%d", orphan)) {
		t.Errorf("the delete of group ghost's load balancer did not come from %s: its mutating requests %v", replica.Name, mutating)
	}
}

// startWebhookReplica starts a second CCM replica that serves the admission webhook (with
// leader election on the same Lease, the fast election flags and args) against the Hetzner API
// at endpoint, and returns once the webhook serves.
func startWebhookReplica(t *testing.T, c *harness.Cluster, endpoint, token string, args ...string) *harness.Process {
	t.Helper()
	sc := harness.NewServingCert(t, "webhook-replica")
	port := harness.FreePort(t)
	all := append(append(slices.Clone(fastElection), webhookArgs(port, sc)...), args...)
	replica, _ := startCCM(t, c, "ccm-webhook-replica", endpoint, token, ccmRun{env: lbEnv, args: all})
	waitServing(t, replica, port, sc.CAPEM)
	return replica
}

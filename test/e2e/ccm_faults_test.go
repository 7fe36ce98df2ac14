//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// The fault matrix of issue 10: one cluster, one emulator and the CCM as deployed with a network
// (deploy/networks: load balancers and routes), and one case per fault class. Each case injects
// its fault, makes the CCM act under it (create a Service, change one, add a node, delete a
// Service, kill the CCM), clears the faults, and then asserts the invariants:
//
//   - convergence: every Service has its address and exactly one load balancer with its listeners,
//     every node its route;
//   - 0 duplicate load balancers (two labelled for one Service, or two of one name);
//   - 0 orphan load balancers (labelled for a Service that does not exist);
//   - 0 stray routes (a route that is no node's pod CIDR via its IP, or one destination twice).

// faultTimeout bounds each case's convergence after its faults are cleared.
const faultTimeout = 60 * time.Second

// faultEnv is the cluster, the emulator and the CCM the cases share.
type faultEnv struct {
	// root is the matrix test: the CCMs and nodes live as long as it does. t is the running
	// case, which the invariant checks fail.
	root     *testing.T
	t        *testing.T
	c        *harness.Cluster
	emu      *hcloudemu.Emulator
	endpoint string
	netID    int64
	ccm      *harness.Process
	standby  *harness.Process // a second CCM waiting for the Lease, if any
	started  int              // CCMs started, for their names
	// nodes are the registered nodes: name → private IP.
	nodes map[string]string
}

// faultCCMEnv are the CCM's settings for the matrix: a short HTTP timeout (so a hung reply
// fails fast) and short retry waits.
var faultCCMEnv = append([]string{
	"HCLOUD_NETWORK=k8s",
	"HCLOUD_HTTP_TIMEOUT=2s",
	"HCLOUD_RETRY_INTERVAL=200ms",
}, lbEnv...)

// startCCM starts a (new) CCM with fast leader election, so a killed leader's Lease expires
// quickly.
func (e *faultEnv) startCCM() {
	e.started++
	e.ccm, _ = startCCM(e.root, e.c, fmt.Sprintf("ccm-%d", e.started), e.endpoint, e.emu.Token(), ccmRun{
		deploy: deployDir + "/networks",
		env:    faultCCMEnv,
		args:   []string{"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s"},
	})
}

// addNode adds a server in the network and registers its node with pod CIDR 10.244.<n>.0/24.
func (e *faultEnv) addNode(name string, n int, live bool) {
	ip := fmt.Sprintf("10.0.0.%d", 10+n)
	addServer(e.root, e.emu, hcloudemu.ServerSpec{Name: name, Networks: []hcloudemu.ServerNetwork{{NetworkID: e.netID, IP: ip}}})
	cidr := fmt.Sprintf("10.244.%d.0/24", n)
	if live {
		createNodeLive(e.root, e.c, name, cidr, "worker-1")
	} else {
		e.c.CreateNode(e.root, name, cidr, harness.WithInternalIP(ip))
	}
	e.nodes[name] = ip
}

// faultCase is one fault class.
type faultCase struct {
	name string
	// existing: the Service is created and converged before the fault (the fault hits an
	// update or a delete, not the create).
	existing bool
	// faults are injected before act.
	faults []hcloudemu.Fault
	// act makes the CCM work under the faults; nil creates the Service (or, when existing,
	// adds port 443 to it).
	act func(t *testing.T, e *faultEnv, svc string)
	// firedOn is the request route the faults must have hit before they are cleared ("": act
	// waits for its faults itself).
	firedOn string
	// hold keeps the faults this long after they first fired.
	hold time.Duration
	// after runs once the faults are cleared (e.g. start a new CCM).
	after func(t *testing.T, e *faultEnv)
	// deleted: the case deletes its Service, which must be gone with its load balancer.
	deleted bool
}

// TestCCMFaultMatrix runs the fault cases of issue 10 against one CCM (see the top of the file).
func TestCCMFaultMatrix(t *testing.T) {
	t.Parallel()
	e := &faultEnv{root: t, t: t, nodes: map[string]string{}}
	e.c = harness.Start(t)
	e.c.ApplyKustomize(t, deployDir+"/networks")
	e.emu, e.endpoint = hcloudemu.NewTestServer(t)
	var err error
	e.netID, err = e.emu.AddNetwork(hcloudemu.NetworkSpec{
		Name: "k8s", IPRange: "10.0.0.0/8",
		Subnets: []hcloudemu.SubnetSpec{{IPRange: "10.0.0.0/16", NetworkZone: "eu-central"}},
	})
	if err != nil {
		t.Fatalf("add network: %v", err)
	}
	e.addNode("worker-1", 1, false)
	e.startCCM()
	waitCCM(t, e.ccm, faultTimeout, func() (bool, error) { return e.converged() })

	createLB := "POST /v1/load_balancers"
	cases := []faultCase{{
		name:    "create committed then 5xx",
		faults:  []hcloudemu.Fault{{Method: "POST", Pattern: "/v1/load_balancers", Code: "server_error", AfterCommit: true, Times: 1}},
		firedOn: createLB,
	}, {
		name:    "create committed then dropped",
		faults:  []hcloudemu.Fault{{Method: "POST", Pattern: "/v1/load_balancers", Drop: true, AfterCommit: true, Times: 1}},
		firedOn: createLB,
	}, {
		name:    "create committed then hung past the HTTP timeout",
		faults:  []hcloudemu.Fault{{Method: "POST", Pattern: "/v1/load_balancers", Delay: 20 * time.Second, AfterCommit: true, Times: 1}},
		firedOn: createLB,
		hold:    3 * time.Second, // the CCM's HTTP timeout (2 s) passes
	}, {
		name:    "5xx burst on every endpoint",
		faults:  []hcloudemu.Fault{{Pattern: "/v1/*", Code: "unavailable", Probability: 0.5}},
		firedOn: "GET /v1/load_balancers",
		hold:    4 * time.Second,
	}, {
		name:     "load balancer locked by another action",
		existing: true,
		faults:   []hcloudemu.Fault{{Method: "POST", Pattern: "/v1/load_balancers/*/actions/*", Code: "locked", Times: 2}},
		firedOn:  "POST /v1/load_balancers/{id}/actions/add_service",
	}, {
		name:     "action that fails",
		existing: true,
		faults:   []hcloudemu.Fault{{Method: "POST", Pattern: "/v1/load_balancers/*/actions/add_service", FailAction: true, Times: 1}},
		firedOn:  "POST /v1/load_balancers/{id}/actions/add_service",
	}, {
		name:   "429 storm at a low hourly limit",
		faults: nil, // the budget is drained by another client of the project, in act
		act:    actRateLimitStorm,
		// firedOn: "", act waits for the 429s itself
	}, {
		name:     "Service deleted during an outage",
		existing: true,
		faults:   []hcloudemu.Fault{{Pattern: "/v1/*", Raw: true, Status: http.StatusServiceUnavailable}},
		act: func(t *testing.T, e *faultEnv, svc string) {
			if err := e.c.Client().CoreV1().Services("default").Delete(context.Background(), svc, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete service %s: %v", svc, err)
			}
		},
		firedOn: "GET /v1/load_balancers",
		hold:    3 * time.Second,
		deleted: true,
	}, {
		name:   "route create committed then 5xx",
		faults: []hcloudemu.Fault{{Method: "POST", Pattern: "/v1/networks/*/actions/add_route", Code: "server_error", AfterCommit: true, Times: 1}},
		act: func(t *testing.T, e *faultEnv, _ string) {
			e.addNode("worker-2", 2, true)
		},
		firedOn: "POST /v1/networks/{id}/actions/add_route",
		hold:    3 * time.Second, // time for a retry that would add the route twice
	}, {
		name:   "SIGKILL mid-plan (create committed, reply pending), then a new CCM",
		faults: []hcloudemu.Fault{{Method: "POST", Pattern: "/v1/load_balancers", Delay: 30 * time.Second, AfterCommit: true, Times: 1}},
		after: func(t *testing.T, e *faultEnv) {
			e.ccm.Kill()
			t.Logf("killed %s with SIGKILL while its create was pending", e.ccm.Name)
			e.startCCM()
		},
		firedOn: createLB,
	}, {
		name:   "leader failover mid-plan: the standby takes over",
		faults: []hcloudemu.Fault{{Method: "POST", Pattern: "/v1/load_balancers", Delay: 30 * time.Second, AfterCommit: true, Times: 1}},
		act: func(t *testing.T, e *faultEnv, svc string) {
			leader := e.ccm
			e.startCCM() // the standby: waits for the Lease
			e.standby, e.ccm = e.ccm, leader
			createService(t, e.c, loadBalancerService("default", svc))
		},
		after: func(t *testing.T, e *faultEnv) {
			e.ccm.Kill()
			t.Logf("killed the leader %s with SIGKILL while its create was pending", e.ccm.Name)
			e.ccm = e.standby
			waitCCM(t, e.ccm, faultTimeout, func() (bool, error) {
				return strings.Contains(e.ccm.Logs(), "Successfully acquired lease"), fmt.Errorf("%s has not taken the Lease", e.ccm.Name)
			})
		},
		firedOn: createLB,
	}}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			e.t = t
			svc := fmt.Sprintf("fault-%d", i)
			if tc.existing {
				createService(t, e.c, loadBalancerService("default", svc))
				waitCCM(t, e.ccm, faultTimeout, func() (bool, error) { return e.converged() })
			}
			before := e.emu.Counts()[tc.firedOn]
			for _, f := range tc.faults {
				e.emu.AddFault(f)
			}
			switch {
			case tc.act != nil:
				tc.act(t, e, svc)
			case tc.existing:
				updateService(t, e.c, "default", svc, func(s *corev1.Service) {
					s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443})
				})
			default:
				createService(t, e.c, loadBalancerService("default", svc))
			}
			waitCCM(t, e.ccm, faultTimeout, func() (bool, error) {
				n := e.emu.Counts()[tc.firedOn]
				return tc.firedOn == "" || n > before, fmt.Errorf("no %s request under the fault yet", tc.firedOn)
			})
			time.Sleep(tc.hold)
			e.emu.ClearFaults()
			if tc.after != nil {
				tc.after(t, e)
			}
			cleared := time.Now()
			waitCCM(t, e.ccm, faultTimeout, func() (bool, error) { return e.converged() })
			if tc.deleted {
				waitCCM(t, e.ccm, faultTimeout, func() (bool, error) {
					_, err := e.c.Client().CoreV1().Services("default").Get(context.Background(), svc, metav1.GetOptions{})
					return apierrors.IsNotFound(err), fmt.Errorf("service %s still exists (finalizer not removed): %w", svc, err)
				})
			}
			t.Logf("converged %.1f s after the faults were cleared (case: %.1f s)", time.Since(cleared).Seconds(), time.Since(start).Seconds())
		})
		if t.Failed() {
			break // the next cases would fail on this one's leftovers
		}
	}
}

// actRateLimitStorm sets a low hourly limit, drains the budget as another client of the
// project would, and creates the Service: the CCM's requests get 429 (a storm), until the
// budget refills (the emulator's clock moves an hour on). The CCM must then converge at once,
// not stay locked out.
func actRateLimitStorm(t *testing.T, e *faultEnv, svc string) {
	const limit = 360
	e.emu.SetRateLimit(limit)
	t.Cleanup(func() { e.emu.SetRateLimit(0) })
	req, err := http.NewRequest("GET", e.endpoint+"/locations", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.emu.Token())
	for range limit {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("drain the budget: %v", err)
		}
		resp.Body.Close()
	}
	drained := len(e.emu.Requests())
	createService(t, e.c, loadBalancerService("default", svc))
	waitCCM(t, e.ccm, faultTimeout, func() (bool, error) {
		return slices.ContainsFunc(e.emu.Requests()[drained:], func(r hcloudemu.Request) bool {
			return r.Status == http.StatusTooManyRequests
		}), fmt.Errorf("the CCM got no 429 yet")
	})
	time.Sleep(3 * time.Second) // the storm
	e.emu.SetRateLimit(limit)   // the budget refills, as after an hour
}

// converged reports whether the invariants hold: see the top of the file. A duplicate or an
// orphan load balancer, or a stray route, is not waited for: it fails the test at once.
func (e *faultEnv) converged() (bool, error) {
	t := e.t
	ctx := context.Background()
	list, err := e.c.Client().CoreV1().Services("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	live := map[string]*corev1.Service{}
	for i := range list.Items {
		s := &list.Items[i]
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			live[string(s.UID)] = s
		}
	}
	lbs := e.emu.LoadBalancers()
	byUID := map[string][]schema.LoadBalancer{}
	names := map[string]int{}
	for _, lb := range lbs {
		byUID[lb.Labels[labelServiceUID]] = append(byUID[lb.Labels[labelServiceUID]], lb)
		names[lb.Name]++
	}
	for uid, l := range byUID {
		if len(l) > 1 {
			t.Fatalf("duplicate: %d load balancers labelled %s=%s: %v", len(l), labelServiceUID, uid, lbNames(l))
		}
	}
	for name, n := range names {
		if n > 1 {
			t.Fatalf("duplicate: %d load balancers named %s", n, name)
		}
	}
	for uid, l := range byUID {
		if s, ok := live[uid]; !ok || s.DeletionTimestamp != nil {
			return false, fmt.Errorf("orphan: load balancer %v labelled for a Service that is gone or going", lbNames(l))
		}
	}
	for uid, s := range live {
		if s.DeletionTimestamp != nil {
			return false, fmt.Errorf("service %s is being deleted", s.Name)
		}
		l := byUID[uid]
		if len(l) == 0 {
			return false, fmt.Errorf("service %s has no load balancer yet", s.Name)
		}
		if got, want := listeners(l[0]), wantListeners(s); !slices.Equal(got, want) {
			return false, fmt.Errorf("service %s: listeners %v, want %v", s.Name, got, want)
		}
		if len(s.Status.LoadBalancer.Ingress) == 0 {
			return false, fmt.Errorf("service %s has no address yet", s.Name)
		}
	}
	return e.routesConverged()
}

// routesConverged reports whether the network holds exactly one route per node (its pod CIDR
// via its IP); a route that is no node's fails the test at once.
func (e *faultEnv) routesConverged() (bool, error) {
	network, ok := e.emu.Network(e.netID)
	if !ok {
		e.t.Fatalf("network %d is gone", e.netID)
	}
	want := map[string]string{}
	nodes, err := e.c.Client().CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, n := range nodes.Items {
		if ip, ok := e.nodes[n.Name]; ok && n.Spec.PodCIDR != "" {
			want[n.Spec.PodCIDR] = ip
		}
	}
	seen := map[string]bool{}
	for _, r := range network.Routes {
		if seen[r.Destination] {
			e.t.Fatalf("stray route: %s twice in %+v", r.Destination, network.Routes)
		}
		seen[r.Destination] = true
		if want[r.Destination] != r.Gateway {
			e.t.Fatalf("stray route: %s via %s, want %v", r.Destination, r.Gateway, want)
		}
	}
	for dest, gw := range want {
		if !seen[dest] {
			return false, fmt.Errorf("no route %s via %s yet", dest, gw)
		}
	}
	return true, nil
}

//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// TestCCMMetricsAddressUnusable is issue 19's item 4 for the metrics server: with metrics
// enabled, an HCLOUD_METRICS_ADDRESS already in use, or an empty one, is logged and the CCM
// runs on and initialises nodes, as the official CCM does (it logs "create metrics service").
func TestCCMMetricsAddressUnusable(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Close() })
	tests := []struct {
		name, addr, wantLog string
	}{
		{"in use", busy.Addr().String(), "Metrics server not started: cannot listen on HCLOUD_METRICS_ADDRESS"},
		{"empty", "", "Metrics server not started: HCLOUD_METRICS_ADDRESS is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, emu, endpoint, id := oneWorker(t, "")
			ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{
				env: []string{"HCLOUD_METRICS_ENABLED=true", "HCLOUD_METRICS_ADDRESS=" + tc.addr},
			})
			waitInitialised(t, c, ccm, "worker-1", id)
			harness.WaitFor(t, 10*time.Second, func() (bool, error) {
				if strings.Contains(ccm.Logs(), tc.wantLog) {
					return true, nil
				}
				return false, fmt.Errorf("no %q in the CCM's log yet", tc.wantLog)
			})
			if exited, err := ccm.Exited(); exited {
				t.Fatalf("the CCM exited (%v), want it running:\n%s", err, ccm.Tail(30))
			}
		})
	}
}

// TestCCMStartsWithValuesTheOfficialAccepts is issue 19's item 4 end to end: the CCM binary
// starts with every value of the issue that the official CCM accepts, set at once, and gives
// them the official meaning (an empty address family is ipv4: the node gets its public IPv4
// as ExternalIP and no IPv6).
func TestCCMStartsWithValuesTheOfficialAccepts(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id := oneWorker(t, "")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{env: []string{
		"HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL=",
		"HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT=-1s",
		"HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES=",
		"ROBOT_CACHE_TIMEOUT=",
		"ROBOT_RATE_LIMIT_WAIT_TIME=",
		"HCLOUD_INSTANCES_ADDRESS_FAMILY=",
		"HCLOUD_METRICS_ENABLED=true",
		"HCLOUD_METRICS_ADDRESS=",
		"HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE=ROUND_ROBIN",
		"HCLOUD_NETWORK_ROUTES_ENABLED=junk", // no HCLOUD_NETWORK: not read
	}})
	waitInitialised(t, c, ccm, "worker-1", id)
	// The addresses come with the node status update that follows initialisation: wait for them.
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		node, err := c.Client().CoreV1().Nodes().Get(t.Context(), "worker-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		var external []string
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeExternalIP {
				external = append(external, a.Address)
			}
		}
		if len(external) != 1 || net.ParseIP(external[0]).To4() == nil {
			return false, fmt.Errorf("ExternalIPs = %v, want the public IPv4 alone (an empty HCLOUD_INSTANCES_ADDRESS_FAMILY is ipv4)", external)
		}
		return true, nil
	})
	for _, want := range []string{"HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT=-1s is negative", `HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE="ROUND_ROBIN" is accepted as "round_robin"`} {
		if !strings.Contains(ccm.Logs(), want) {
			t.Errorf("no warning %q in the CCM's log", want)
		}
	}
}

package loadbalancer_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// holdFirst holds the first request whose path ends in suffix until release is closed, and
// closes held when it does; every other request passes.
type holdFirst struct {
	suffix  string
	held    chan struct{}
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	sent    int // requests with the suffix
}

func (h *holdFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, h.suffix) {
		h.mu.Lock()
		h.sent++
		first := h.sent == 1
		h.mu.Unlock()
		if first {
			h.once.Do(func() { close(h.held) })
			<-h.release
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestConcurrentEnsureAndUpdate: an Ensure (a port removed) and an Update (a node joins) of one
// Service at once, as the service worker and the node sync call them, plan one after the
// other: the Update plans from what the Ensure left, so the listener is deleted once, the target
// is added, and neither call fails. Before lockService, the Update planned from the state
// before the Ensure, sent the same delete_service (404 for one of them) and the Ensure's store
// then overwrote the Update's target (e2e TestCCMLoadBalancerLifecycle, k8s 1.33, "node
// removed": target servers [1 2], want [1]).
func TestConcurrentEnsureAndUpdate(t *testing.T) {
	hold := &holdFirst{suffix: "/actions/delete_service", held: make(chan struct{}), release: make(chan struct{})}
	ev := newEnv(t, func(c *envConfig) { c.transport = hold })
	ctx := context.Background()
	svc := newService("web", withPorts(80, 443))
	if _, err := ev.lbs.EnsureLoadBalancer(ctx, clusterName, svc, ev.nodes[:1]); err != nil {
		t.Fatalf("first Ensure: %v", err)
	}
	narrowed := newService("web", withPorts(80))
	ensureErr, updateErr := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := ev.lbs.EnsureLoadBalancer(ctx, clusterName, narrowed, ev.nodes[:1])
		ensureErr <- err
	}()
	<-hold.held // the Ensure sends delete_service(443) and waits for the API's answer
	go func() { updateErr <- ev.lbs.UpdateLoadBalancer(ctx, clusterName, narrowed, ev.nodes) }()
	// Give an Update that does not wait the time to plan and send; one that waits returns after
	// the release either way, so the outcome below never depends on this pause.
	select {
	case err := <-updateErr:
		updateErr <- err
	case <-time.After(300 * time.Millisecond):
	}
	close(hold.release)
	if err := <-ensureErr; err != nil {
		t.Errorf("Ensure: %v", err)
	}
	if err := <-updateErr; err != nil {
		t.Errorf("Update: %v", err)
	}
	hold.mu.Lock()
	if hold.sent != 1 {
		t.Errorf("%d delete_service requests, want 1", hold.sent)
	}
	hold.mu.Unlock()
	if err := ev.lbs.UpdateLoadBalancer(ctx, clusterName, narrowed, ev.nodes); err != nil {
		t.Fatalf("settling Update: %v", err)
	}
	lb := ev.onlyLB()
	var ports []int
	for _, s := range lb.Services {
		ports = append(ports, s.ListenPort)
	}
	var targets []int64
	for _, tg := range lb.Targets {
		targets = append(targets, tg.Server.Server.ID)
	}
	slices.Sort(targets)
	if !slices.Equal(ports, []int{80}) || len(targets) != len(ev.nodes) {
		t.Errorf("listeners %v, targets %v; want [80] and every node's server", ports, targets)
	}
}

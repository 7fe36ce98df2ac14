//go:build bench

// Package bench measures the CCM binary at cluster scale: a real kube-apiserver and etcd
// (test/e2e/harness) and the Hetzner API emulator (internal/hcloudemu) in this process, the CCM
// as deployed by deploy/networks (routes on, HCLOUD_NETWORK set), and N nodes with S Services
// of type LoadBalancer. It prints one Markdown table (and writes it to $BENCH_OUT): Hetzner
// requests, times, memory and CPU of the CCM process. docs/performance.md explains the figures.
//
// Configuration (environment):
//
//	BENCH_SIZES   sizes as NODESxSERVICES[p][+JOIN[/BATCH]], comma separated (default "10x2",
//	              the smoke size). After the steady window JOIN new nodes (default:
//	              defaultJoin) join as load balancer targets, BATCH at a time (default: all at
//	              once; 1: one node event after the other): the churn phase, see runChurn.
//	              Without p every Service targets the same 10 labelled nodes and every joining
//	              node; with p the nodes are in SERVICES/2 node pools and 2 Services select
//	              each pool by load-balancer.hetzner.cloud/node-selector (issue 24's setup)
//	BENCH_STEADY  length of the steady-state window (default 20s), or auto: the period of the
//	              server list at the size under the default API budget (see steadyWindow)
//	BENCH_OUT     file the Markdown table is written to (default: none, printed only)
//	BENCH_POLICIES on (the example policies as deployed, in enforce mode), off (no --policy-*
//	              flags: every mutation allowed) or both (each size twice) (default on)
//	BENCH_PAGECACHE cold (default): the CCM binary's pages are dropped from the page cache before
//	              each start, so its resident pages are those it reads; warm: as the build left
//	              them (see pageCacheMode)
//	BENCH_PPROF   a directory: the CCM serves /debug/pprof on its secure port and the bench
//	              saves there, at the end of each phase, a heap profile, the same as text
//	              (ending in the runtime's MemStats) and the goroutines' stacks (default: none)
//	BENCH_PPROF_CPU with BENCH_PPROF, a duration such as 90s: the bench also saves there a CPU
//	              profile of the CCM's first BENCH_PPROF_CPU (from the moment its secure port
//	              answers, a second or so after the start) and one of the steady window, or of
//	              what is left of it after the first, and of the churn phase's first 30 s
//	              (cpu-<size>-1-start.pb.gz, cpu-<size>-3-steady.pb.gz, cpu-<size>-4-churn.pb.gz;
//	              default: none)
//	BENCH_OFFICIAL_BIN the official hcloud-cloud-controller-manager binary (test/tools/official-ccm,
//	              `make bench-official`): each size runs with this CCM and then with the official,
//	              in the same scenario (the official gets the same flags less --policy-*, the same
//	              environment), and the table adds each pair's CPU ratios (default: none, only
//	              this CCM runs); BENCH_OFFICIAL_ONLY=1 runs the official alone
//	BENCH_CCM_ENV more environment of this CCM (not of the official), KEY=VALUE[,KEY=VALUE...],
//	              for example GOGC=50 to measure another GC target (default: none)
//	CCM_BIN       the CCM binary (default: CGO_ENABLED=0 go build -trimpath -tags grpcnotrace ./cmd/hcloud-policy-ccm,
//	              as the Makefile builds it)
//	KUBE_BIN_DIR  kube-apiserver, etcd, kubectl (see test/e2e/harness)
package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

const (
	// deployDir is the kustomization the CCM's flags come from: routes on.
	deployDir         = "../../deploy/networks"
	ccmNamespace      = "kube-system"
	ccmServiceAccount = "hcloud-cloud-controller-manager"
	// clusterCIDR is the --cluster-cidr of deployDir; node pod CIDRs are cut from it.
	clusterCIDR = "10.244.0.0/16"
	// lbTargetLabel marks the nodes that are load balancer targets (the Services' node-selector):
	// an lb11 takes at most 25 targets, so not every node can be one at scale.
	lbTargetLabel = "bench.hcloud-policy-ccm/lb-target"
	lbTargets     = 10
	// poolLabel names a node's pool in a size with node pools; servicesPerPool Services select
	// each pool.
	poolLabel       = "bench.hcloud-policy-ccm/pool"
	servicesPerPool = 2
	// rateLimit is the Hetzner API's default limit per project and hour, enforced by the emulator.
	rateLimit = 3600
	// clkTck is USER_HZ, the unit of utime and stime in /proc/<pid>/stat (100 on Linux).
	clkTck = 100
)

// size is one benchmark configuration.
type size struct {
	nodes, services int
	// join nodes join after the steady window, batch at a time (the churn phase; 0: none).
	join, batch int
	// pools puts the nodes in services/servicesPerPool node pools (node i in pool i mod pools),
	// each selected by servicesPerPool Services; without, every Service selects the lbTargets
	// labelled nodes and every joining node.
	pools       bool
	policiesOff bool // no --policy-* flags: the allow-all gate
	// official runs BENCH_OFFICIAL_BIN, the official CCM, instead of this one (no policies).
	official bool
}

// poolCount is the number of node pools of a size with pools.
func (s size) poolCount() int { return s.services / servicesPerPool }

// pool is the pool of node i.
func (s size) pool(i int) string { return fmt.Sprintf("pool-%02d", i%s.poolCount()) }

// servicesPerNode is how many Services select a joining node.
func (s size) servicesPerNode() int {
	if s.pools {
		return servicesPerPool
	}
	return s.services
}

func (s size) String() string {
	if s.official {
		return fmt.Sprintf("%d nodes / %d Services%s / %s / official CCM", s.nodes, s.services, s.poolNote(), s.churn())
	}
	return fmt.Sprintf("%d nodes / %d Services%s / %s / policies %s", s.nodes, s.services, s.poolNote(), s.churn(), onOff(!s.policiesOff))
}

// poolNote is ", 2 per node pool" for a size with pools, else "".
func (s size) poolNote() string {
	if s.pools {
		return fmt.Sprintf(", %d per node pool", servicesPerPool)
	}
	return ""
}

// churn describes the churn phase: "10 nodes join at once", "10 nodes join one at a time".
func (s size) churn() string {
	switch {
	case s.join == 0:
		return "no churn"
	case s.batch >= s.join:
		return fmt.Sprintf("%d nodes join at once", s.join)
	case s.batch == 1:
		return fmt.Sprintf("%d nodes join one at a time", s.join)
	}
	return fmt.Sprintf("%d nodes join %d at a time", s.join, s.batch)
}

// name is the size as in BENCH_SIZES, with the policy switch.
func (s size) name() string {
	p := ""
	if s.pools {
		p = "p"
	}
	if s.official {
		return fmt.Sprintf("%dx%d%s+%d-%d-official", s.nodes, s.services, p, s.join, s.batch)
	}
	return fmt.Sprintf("%dx%d%s+%d-%d-policies-%s", s.nodes, s.services, p, s.join, s.batch, onOff(!s.policiesOff))
}

// scenario is the size without the binary and policy switches: the key that pairs a run of this
// CCM with one of the official.
func (s size) scenario() size {
	s.official, s.policiesOff = false, false
	return s
}

// defaultJoin is the churn of a size without +JOIN: 10 nodes, a fifth of the nodes at smaller
// sizes (2 at the smoke size, 10x2), so bench-smoke stays fast.
func defaultJoin(nodes int) int {
	return min(10, max(1, nodes/5))
}

// maxChurnTargets is the most targets a Service may have after the churn phase: an lb11 takes 25.
const maxChurnTargets = 25

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// result is what one size measured.
type result struct {
	size   size
	steady time.Duration

	nodesTime, servicesTime time.Duration // CCM start → all nodes initialised and routed; Services created → all addressed
	nodesReq, servicesReq   counts
	steadyReq               counts
	churnReq                counts        // the churn phase: JOIN nodes join
	churnTime               time.Duration // first node created → every new target and route in place
	churnEvents             []counts      // one per batch
	churnLBReads            int           // GET /v1/load_balancers (lists and reads by label)
	peakRSS, steadyRSS      int64         // KiB
	peakAnon, steadyAnon    int64         // KiB; peakAnon sampled once a second
	steadyFile              int64         // KiB
	cpuNodes                float64       // CPU seconds, start → all nodes initialised and routed
	cpuInit, cpuSteady      float64
	cpuChurn                float64 // CPU seconds of the churn phase
}

// cpuPerIdleMinute is the CPU seconds of the steady window per minute.
func (r result) cpuPerIdleMinute() float64 { return r.cpuSteady / r.steady.Minutes() }

// cpuTotal is the CPU seconds of all phases.
func (r result) cpuTotal() float64 { return r.cpuInit + r.cpuSteady + r.cpuChurn }

// counts are the emulator's request counters of one phase.
type counts struct {
	total, mutating, limited int
	byRoute                  map[string]int
}

func TestBench(t *testing.T) {
	sizes, err := parseSizes(envOr("BENCH_SIZES", "10x2"))
	if err != nil {
		t.Fatal(err)
	}
	steadyFlag := envOr("BENCH_STEADY", "20s")
	steady, err := time.ParseDuration(steadyFlag)
	if steadyFlag != "auto" && (err != nil || steady <= 0) {
		t.Fatalf("BENCH_STEADY=%q: want a positive duration such as 5m, or auto (%v)", steadyFlag, err)
	}
	sizes, err = withPolicies(sizes, envOr("BENCH_POLICIES", "on"))
	if err != nil {
		t.Fatal(err)
	}
	pageCacheMode(t) // a bad value fails before anything starts
	bin := ccmBinary(t)
	official := os.Getenv("BENCH_OFFICIAL_BIN")
	if official != "" {
		if _, err := os.Stat(official); err != nil {
			t.Fatalf("BENCH_OFFICIAL_BIN: %v", err)
		}
		sizes = withOfficial(sizes)
		if os.Getenv("BENCH_OFFICIAL_ONLY") == "1" {
			sizes = slices.DeleteFunc(sizes, func(s size) bool { return !s.official })
		}
	}
	var results []result
	for _, s := range sizes {
		t.Run(s.name(), func(t *testing.T) {
			window := steady
			if steadyFlag == "auto" {
				window = steadyWindow(s.nodes)
			}
			b := bin
			if s.official {
				b = official
			}
			r := run(t, b, s, window)
			results = append(results, r)
			writeTable(t, results) // after each size, so a long run leaves partial results
		})
	}
}

// run measures one size; it fails the test if the CCM does not converge.
func run(t *testing.T, bin string, s size, steady time.Duration) result {
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	emu, endpoint := hcloudemu.NewTestServer(t, hcloudemu.WithRateLimit(rateLimit))
	netID, err := emu.AddNetwork(hcloudemu.NetworkSpec{
		Name: "k8s", IPRange: "10.0.0.0/8",
		Subnets: []hcloudemu.SubnetSpec{{IPRange: "10.0.0.0/16", NetworkZone: "eu-central"}},
	})
	if err != nil {
		t.Fatalf("add network: %v", err)
	}

	// Servers and their Nodes, as kubelets with --cloud-provider=external and --node-ip register
	// them, before the CCM starts (a fresh install on an existing cluster).
	cidrs, err := podCIDRs(s.nodes + s.join)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	for i := range s.nodes {
		addNode(t, c, emu, netID, ids, i, cidrs[i], nodeLabels(s, i, false), false)
	}
	t.Logf("%v: %d servers and nodes created", s, s.nodes)

	if pageCacheMode(t) == "cold" {
		left, err := dropFromPageCache(bin)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v: the CCM binary dropped from the page cache (%.0f%% of its pages still cached)", s, 100*left)
	}
	ccm, port := startCCM(t, c, bin, endpoint, emu.Token(), s.policiesOff || s.official, s.official)
	start := time.Now()
	peakAnon := sampleMax(ccm.Pid(), "RssAnon")
	profile := func(phase string) {
		if dir := os.Getenv("BENCH_PPROF"); dir != "" {
			for file, query := range map[string]string{
				"heap-%s-%s.pb.gz":    "heap?gc=1",
				"heap-%s-%s.txt":      "heap?gc=1&debug=1",
				"goroutine-%s-%s.txt": "goroutine?debug=1",
			} {
				saveProfile(t, port, query, filepath.Join(dir, fmt.Sprintf(file, s.name(), phase)))
			}
		}
	}

	var cpuProfiles sync.WaitGroup
	defer cpuProfiles.Wait()
	startProfiled := make(chan struct{}) // the start profile ended (or none was taken)
	cpuProfile := func(phase string, until time.Time) {
		dir, flag := os.Getenv("BENCH_PPROF"), os.Getenv("BENCH_PPROF_CPU")
		if dir == "" || flag == "" {
			if phase == "1-start" {
				close(startProfiled)
			}
			return
		}
		if phase == "1-start" {
			d, err := time.ParseDuration(flag)
			if err != nil {
				t.Errorf("BENCH_PPROF_CPU=%q: %v", flag, err)
				close(startProfiled)
				return
			}
			until = time.Now().Add(d)
		}
		path := filepath.Join(dir, fmt.Sprintf("cpu-%s-%s.pb.gz", s.name(), phase))
		cpuProfiles.Go(func() {
			if phase == "1-start" {
				defer close(startProfiled)
			} else {
				<-startProfiled // one CPU profile at a time: the steady one starts after the start one
			}
			for range 100 {
				d := time.Until(until)
				if d < time.Second {
					t.Logf("CPU profile %s: no time left to profile", path)
					return
				}
				err := tryProfile(port, fmt.Sprintf("profile?seconds=%d", int(d.Seconds())), path, d+time.Minute)
				if err == nil {
					return
				}
				// The secure port answers a moment after the start; the profile before may
				// still be ending.
				if !strings.Contains(err.Error(), "connection refused") && !strings.Contains(err.Error(), "already in use") {
					t.Errorf("CPU profile %s: %v", path, err)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	cpuProfile("1-start", time.Time{})

	// Phase 1: every node initialised (providerID set, taint gone) and routed.
	waitCCM(t, ccm, 5*time.Minute+time.Duration(s.nodes)*time.Second, func() (bool, error) {
		if n := uninitialised(t, c, ids); n > 0 {
			return false, fmt.Errorf("%d of %d nodes not initialised", n, s.nodes)
		}
		network, _ := emu.Network(netID)
		if len(network.Routes) < s.nodes {
			return false, fmt.Errorf("%d of %d routes", len(network.Routes), s.nodes)
		}
		return true, nil
	})
	r := result{size: s, steady: steady, nodesTime: time.Since(start), nodesReq: take(emu), cpuNodes: cpuSeconds(t, ccm.Pid())}
	// The counters must have seen the work: one add_route per node at least (more if retried).
	if n := r.nodesReq.byRoute["POST /v1/networks/{id}/actions/add_route"]; n < s.nodes {
		t.Errorf("%d add_route requests counted for %d routes: the emulator's counters missed requests", n, s.nodes)
	}
	t.Logf("%v: nodes initialised and routed in %s with %d requests", s, r.nodesTime.Round(time.Millisecond), r.nodesReq.total)
	profile("1-nodes")

	// Phase 2: every Service has an address.
	start = time.Now()
	for i := range s.services {
		selector := lbTargetLabel + "=true"
		if s.pools {
			selector = poolLabel + "=" + s.pool(i/servicesPerPool)
		}
		createService(t, c, fmt.Sprintf("svc-%03d", i), selector)
	}
	servicesTimeout := 5*time.Minute + time.Duration(s.services)*5*time.Second
	if s.official {
		servicesTimeout *= 3 // issue 11 measured 593 s for 50 Services with the official
	}
	waitCCM(t, ccm, servicesTimeout, func() (bool, error) {
		list, err := c.Client().CoreV1().Services("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		addressed := 0
		for _, svc := range list.Items {
			if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && len(svc.Status.LoadBalancer.Ingress) > 0 {
				addressed++
			}
		}
		return addressed == s.services, fmt.Errorf("%d of %d Services addressed", addressed, s.services)
	})
	r.servicesTime = time.Since(start)
	r.servicesReq = take(emu)
	r.cpuInit = cpuSeconds(t, ccm.Pid())
	t.Logf("%v: Services addressed in %s with %d requests", s, r.servicesTime.Round(time.Millisecond), r.servicesReq.total)
	profile("2-services")

	// Phase 3: the steady state, nothing changes.
	t.Logf("%v: measuring the steady state for %s", s, steady)
	cpuProfile("3-steady", time.Now().Add(steady-time.Second))
	deadline := time.Now().Add(steady)
	for time.Now().Before(deadline) {
		if exited, err := ccm.Exited(); exited {
			t.Fatalf("%s exited (%v) in the steady state", ccm.Name, err)
		}
		time.Sleep(min(time.Second, time.Until(deadline)))
	}
	r.steadyReq = take(emu)
	r.cpuSteady = cpuSeconds(t, ccm.Pid()) - r.cpuInit
	r.peakRSS = statusKiB(t, ccm.Pid(), "VmHWM")
	r.steadyRSS = statusKiB(t, ccm.Pid(), "VmRSS")
	r.steadyAnon = statusKiB(t, ccm.Pid(), "RssAnon")
	r.steadyFile = statusKiB(t, ccm.Pid(), "RssFile")
	r.peakAnon = max(peakAnon(), r.steadyAnon)
	profile("3-steady")
	if s.join > 0 {
		cpuProfile("4-churn", time.Now().Add(churnProfile))
		before := cpuSeconds(t, ccm.Pid())
		runChurn(t, c, ccm, emu, netID, ids, cidrs, &r)
		r.cpuChurn = cpuSeconds(t, ccm.Pid()) - before
		profile("4-churn")
	}
	if r.steadyRSS <= 0 || r.peakRSS < r.steadyRSS || r.steadyAnon <= 0 || r.steadyFile <= 0 || r.cpuInit <= 0 {
		t.Errorf("implausible process figures: peak RSS %d KiB, steady RSS %d KiB, CPU %.2f s", r.peakRSS, r.steadyRSS, r.cpuInit)
	}
	return r
}

// churnProfile is the length of the churn phase's CPU profile (BENCH_PPROF_CPU).
const churnProfile = 30 * time.Second

// nodeLabels are the labels of node i: its pool in a size with pools, else the load balancer
// target label on the first lbTargets nodes and on every joining node.
func nodeLabels(s size, i int, joining bool) map[string]string {
	switch {
	case s.pools:
		return map[string]string{poolLabel: s.pool(i)}
	case joining || i < lbTargets:
		return map[string]string{lbTargetLabel: "true"}
	}
	return nil
}

// addNode adds server and Node number i (named node-%04d, with the InternalIP the kubelet's
// --node-ip gives) as a kubelet with --cloud-provider=external registers it, with labels. It records the server ID in ids. A joining node (one added after the
// load balancers, which took the next free IPs of the network) gets its IP from 10.0.200.0 on.
func addNode(t *testing.T, c *harness.Cluster, emu *hcloudemu.Emulator, netID int64, ids map[string]int64, i int, cidr string, labels map[string]string, joining bool) {
	name := fmt.Sprintf("node-%04d", i)
	third := i / 250
	if joining {
		third += 200
	}
	ip := fmt.Sprintf("10.0.%d.%d", third, i%250+2)
	id, err := emu.AddServer(hcloudemu.ServerSpec{Name: name, Networks: []hcloudemu.ServerNetwork{{NetworkID: netID, IP: ip}}})
	if err != nil {
		t.Fatalf("add server %s: %v", name, err)
	}
	ids[name] = id
	opts := []harness.NodeOption{harness.WithInternalIP(ip)}
	if len(labels) > 0 {
		opts = append(opts, harness.WithLabels(labels))
	}
	c.CreateNode(t, name, cidr, opts...)
}

// runChurn is phase 4: r.size.join new servers appear and register as Nodes labelled as load
// balancer targets (or into their node pool), r.size.batch at a time, as an autoscaler adds
// them; each batch is done when every new node is initialised and routed and is a target of the
// load balancer of every Service that selects it. The minimum is one add_route per node and one
// add_target per node and Service selecting it.
func runChurn(t *testing.T, c *harness.Cluster, ccm *harness.Process, emu *hcloudemu.Emulator, netID int64, ids map[string]int64, cidrs []string, r *result) {
	s := r.size
	if n := targetsAfterChurn(s); n > maxChurnTargets {
		t.Fatalf("%v: %d targets per load balancer after the churn, more than an lb11 takes (%d)", s, n, maxChurnTargets)
	}
	take(emu)
	start := time.Now()
	var total counts
	for first := s.nodes; first < s.nodes+s.join; first += s.batch {
		last := min(first+s.batch, s.nodes+s.join)
		for i := first; i < last; i++ {
			addNode(t, c, emu, netID, ids, i, cidrs[i], nodeLabels(s, i, true), true)
		}
		want := map[int64]bool{}
		for i := s.nodes; i < last; i++ {
			want[ids[fmt.Sprintf("node-%04d", i)]] = true
		}
		waitCCM(t, ccm, 5*time.Minute+time.Duration(s.services)*time.Second, func() (bool, error) {
			if n := uninitialised(t, c, ids); n > 0 {
				return false, fmt.Errorf("%d nodes not initialised", n)
			}
			network, _ := emu.Network(netID)
			if len(network.Routes) < last {
				return false, fmt.Errorf("%d of %d routes", len(network.Routes), last)
			}
			lbs := emu.LoadBalancers()
			if len(lbs) != s.services {
				return false, fmt.Errorf("%d load balancers, want %d", len(lbs), s.services)
			}
			// Each new node must be a target of every load balancer whose Service selects it.
			targetOf := map[int64]int{}
			for _, lb := range lbs {
				for _, tg := range lb.Targets {
					if tg.Server != nil && want[tg.Server.ID] {
						targetOf[tg.Server.ID]++
					}
				}
			}
			missing := 0
			for id := range want {
				missing += max(0, s.servicesPerNode()-targetOf[id])
			}
			return missing == 0, fmt.Errorf("%d new targets missing", missing)
		})
		ev := take(emu)
		r.churnEvents = append(r.churnEvents, ev)
		total = add(total, ev)
	}
	r.churnTime = time.Since(start)
	r.churnReq = total
	r.churnLBReads = total.byRoute["GET /v1/load_balancers"]
	t.Logf("%v: churn done in %s with %d requests (%d mutating, minimum %d)", s, r.churnTime.Round(time.Millisecond), total.total, total.mutating, churnMinimum(s))
}

// churnMinimum is the fewest mutations the churn phase can take: a route per new node and a
// target per new node and Service selecting it.
func churnMinimum(s size) int {
	return s.join * (1 + s.servicesPerNode())
}

// targetsAfterChurn is the most targets a load balancer has after the churn phase.
func targetsAfterChurn(s size) int {
	if !s.pools {
		return lbTargets + s.join
	}
	pools := s.poolCount()
	return (s.nodes + s.join + pools - 1) / pools // node i is in pool i mod pools: at most ⌈n/pools⌉ per pool
}

// add sums two phases' counters.
func add(a, b counts) counts {
	out := counts{total: a.total + b.total, mutating: a.mutating + b.mutating, limited: a.limited + b.limited, byRoute: map[string]int{}}
	for k, v := range a.byRoute {
		out.byRoute[k] += v
	}
	for k, v := range b.byRoute {
		out.byRoute[k] += v
	}
	return out
}

// take returns the emulator's counters and resets them.
func take(emu *hcloudemu.Emulator) counts {
	c := counts{byRoute: emu.Counts(), mutating: emu.MutatingRequests()}
	for _, n := range c.byRoute {
		c.total += n
	}
	for _, req := range emu.Requests() {
		if req.Status == 429 {
			c.limited++
		}
	}
	emu.ResetRequests()
	return c
}

// uninitialised returns how many of the nodes have no providerID hcloud://<id> or still carry
// the uninitialized taint.
func uninitialised(t *testing.T, c *harness.Cluster, ids map[string]int64) int {
	list, err := c.Client().CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Logf("list nodes: %v", err)
		return len(ids)
	}
	n := len(ids)
	for _, node := range list.Items {
		id, ok := ids[node.Name]
		tainted := slices.ContainsFunc(node.Spec.Taints, func(taint corev1.Taint) bool { return taint.Key == harness.TaintUninitialized })
		if ok && node.Spec.ProviderID == fmt.Sprintf("hcloud://%d", id) && !tainted {
			n--
		}
	}
	return n
}

// createService creates a LoadBalancer Service in namespace default (allowed by the example
// policies) whose targets are the nodes selector selects.
func createService(t *testing.T, c *harness.Cluster, name, selector string) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: map[string]string{
			"load-balancer.hetzner.cloud/node-selector": selector,
		}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
	if _, err := c.Client().CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service %s: %v", name, err)
	}
}

// startCCM runs the CCM out of cluster with the container args of deployDir's Deployment, as its
// ServiceAccount, against the emulator at endpoint with HCLOUD_NETWORK=k8s, with
// --policy-mode=enforce appended; policiesOff drops the --policy-* flags instead (so the official
// CCM, which has none, starts with the same flags and environment as this one). It returns the process and its secure port.
func startCCM(t *testing.T, c *harness.Cluster, bin, endpoint, token string, policiesOff, official bool) (*harness.Process, int) {
	var d appsv1.Deployment
	for _, doc := range strings.Split(harness.Kustomize(t, deployDir), "\n---\n") {
		if strings.Contains(doc, "\nkind: Deployment\n") || strings.HasPrefix(doc, "kind: Deployment\n") {
			if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
				t.Fatalf("parse the Deployment of %s: %v", deployDir, err)
			}
		}
	}
	if len(d.Spec.Template.Spec.Containers) == 0 {
		t.Fatalf("kubectl kustomize %s renders no Deployment", deployDir)
	}
	kubeconfig := c.ServiceAccountKubeconfig(t, ccmNamespace, ccmServiceAccount)
	port := harness.FreePort(t)
	args := slices.DeleteFunc(slices.Clone(d.Spec.Template.Spec.Containers[0].Args), func(arg string) bool {
		return policiesOff && strings.HasPrefix(arg, "--policy-")
	})
	if !policiesOff {
		// deploy/ ships the policies in dry run (swap-safe); the figures are of the gate in
		// force, so the bench enforces explicitly (the later --policy-mode wins).
		args = append(args, "--policy-mode=enforce")
	}
	args = append(args,
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--secure-port="+strconv.Itoa(port),
		"--bind-address=127.0.0.1",
		"--v=1",
	)
	if os.Getenv("BENCH_PPROF") != "" {
		args = append(args, "--authorization-always-allow-paths=/healthz,/readyz,/livez,/debug/pprof/*")
	}
	env := []string{
		"HCLOUD_TOKEN=" + token,
		"HCLOUD_ENDPOINT=" + endpoint,
		"HCLOUD_NETWORK=k8s",
		"HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK=true",
		"HCLOUD_METRICS_ADDRESS=127.0.0.1:" + strconv.Itoa(harness.FreePort(t)),
		"HCLOUD_LOAD_BALANCERS_LOCATION=fsn1",
		"HCLOUD_LOAD_BALANCERS_TYPE=lb11",
	}
	if extra := os.Getenv("BENCH_CCM_ENV"); extra != "" && !official {
		env = append(env, strings.Split(extra, ",")...)
	}
	return harness.StartProcess(t, "ccm", bin, args, env), port
}

// nodeStatusPeriod is the cloud node controller's --node-status-update-frequency (default): the
// tick at which the CCM's steady server lookups happen.
const nodeStatusPeriod = 5 * time.Minute

// steadyWindow returns the steady window for BENCH_STEADY=auto: the period at which n servers
// are listed in the steady state under the default HCLOUD_API_BUDGET_PER_HOUR, that is the
// list's keep time (pages × 1h / (budget/2)) rounded up to whole node status periods, at
// least one. A window of one period holds exactly one list, so requests/hour scales exactly.
func steadyWindow(n int) time.Duration {
	pages := (n + 49) / 50
	keep := time.Duration(pages) * 2 * time.Hour / config.DefaultAPIBudgetPerHour
	periods := max(1, (keep+nodeStatusPeriod-1)/nodeStatusPeriod)
	return periods * nodeStatusPeriod
}

// withOfficial returns sizes with, after each size, the same scenario run by the official CCM.
func withOfficial(sizes []size) []size {
	var out []size
	for _, s := range sizes {
		o := s.scenario()
		o.official = true
		out = append(out, s, o)
	}
	return out
}

// withPolicies returns sizes for BENCH_POLICIES: on, off, or both (each size on, then off).
func withPolicies(sizes []size, mode string) ([]size, error) {
	var out []size
	for _, s := range sizes {
		switch mode {
		case "on":
			out = append(out, s)
		case "off":
			s.policiesOff = true
			out = append(out, s)
		case "both":
			off := s
			off.policiesOff = true
			out = append(out, s, off)
		default:
			return nil, fmt.Errorf("BENCH_POLICIES=%q: want on, off or both", mode)
		}
	}
	return out, nil
}

// saveProfile saves the CCM's profile GET /debug/pprof/<query> (on its secure port) to path.
func saveProfile(t *testing.T, port int, query, path string) {
	if err := tryProfile(port, query, path, time.Minute); err != nil {
		t.Errorf("profile %s to %s: %v", query, path, err)
	}
}

// tryProfile saves the CCM's profile GET /debug/pprof/<query> to path, waiting up to timeout.
func tryProfile(port int, query, path string, timeout time.Duration) error {
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/%s", port, query))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %s: %s", resp.Status, b)
	}
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	return err
}

// waitCCM is harness.WaitFor that fails at once when ccm exits meanwhile; it polls every 100 ms,
// so conditions that list many objects are rate-limited to one evaluation per second.
func waitCCM(t *testing.T, ccm *harness.Process, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	var last time.Time
	var lastErr error
	harness.WaitFor(t, timeout, func() (bool, error) {
		if exited, err := ccm.Exited(); exited {
			t.Fatalf("%s exited (%v)", ccm.Name, err)
		}
		if time.Since(last) < time.Second {
			return false, lastErr
		}
		last = time.Now()
		ok, err := cond()
		lastErr = err
		return ok, err
	})
}

// podCIDRs returns n distinct pod CIDRs in clusterCIDR: /24s while they fit, smaller otherwise.
func podCIDRs(n int) ([]string, error) {
	prefix := 24
	for 1<<(prefix-16) < n {
		prefix++
	}
	if prefix > 30 {
		return nil, fmt.Errorf("%d nodes do not fit pod CIDRs into %s", n, clusterCIDR)
	}
	out := make([]string, n)
	for i := range n {
		addr := uint32(10)<<24 | uint32(244)<<16 | uint32(i)<<(32-prefix)
		out[i] = fmt.Sprintf("%d.%d.%d.%d/%d", addr>>24, addr>>16&0xff, addr>>8&0xff, addr&0xff, prefix)
	}
	return out, nil
}

// cpuSeconds returns the user plus system CPU time of process pid so far.
func cpuSeconds(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("read CPU time of the CCM: %v", err)
	}
	// The command name (field 2) may contain spaces; the fields after it start at ") ".
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	fields := strings.Fields(rest) // fields[0] is field 3 (state): utime is field 14, stime 15
	if len(fields) < 13 {
		t.Fatalf("/proc/%d/stat: %d fields after the command name, want at least 13", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: utime %q, stime %q", pid, fields[11], fields[12])
	}
	return float64(utime+stime) / clkTck
}

// sampleMax reads field of /proc/<pid>/status once a second until the process ends, and
// returns a function that returns the largest value read so far (KiB).
func sampleMax(pid int, field string) func() int64 {
	var mu sync.Mutex
	var peak int64
	go func() {
		for {
			v, err := readStatusKiB(pid, field)
			if err != nil {
				return // the process ended
			}
			mu.Lock()
			peak = max(peak, v)
			mu.Unlock()
			time.Sleep(time.Second)
		}
	}()
	return func() int64 {
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// statusKiB returns field (VmHWM, VmRSS) of /proc/<pid>/status in KiB.
func statusKiB(t *testing.T, pid int, field string) int64 {
	v, err := readStatusKiB(pid, field)
	if err != nil {
		t.Fatalf("memory of the CCM: %v", err)
	}
	return v
}

// readStatusKiB returns field (VmHWM, VmRSS, RssAnon, RssFile) of /proc/<pid>/status in KiB.
func readStatusKiB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status %s: %q", pid, field, v)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, field)
}

// parseSizes parses "50x10,500x50+10,50x200+10/1".
func parseSizes(s string) ([]size, error) {
	var out []size
	for part := range strings.SplitSeq(s, ",") {
		bad := fmt.Errorf("BENCH_SIZES=%q: want NODESxSERVICES[p][+JOIN[/BATCH]][,...] such as 50x10,500x50p+10,50x200+10/1", s)
		base, churn, hasChurn := strings.Cut(strings.TrimSpace(part), "+")
		n, svc, ok := strings.Cut(base, "x")
		svc, pools := strings.CutSuffix(svc, "p")
		nodes, err1 := strconv.Atoi(n)
		services, err2 := strconv.Atoi(svc)
		if !ok || err1 != nil || err2 != nil || nodes < 1 || services < 0 {
			return nil, bad
		}
		if pools && (services < servicesPerPool || services%servicesPerPool != 0) {
			return nil, fmt.Errorf("BENCH_SIZES=%q: node pools need a multiple of %d Services (%d per pool), not %d", s, servicesPerPool, servicesPerPool, services)
		}
		sz := size{nodes: nodes, services: services, join: defaultJoin(nodes), pools: pools}
		if hasChurn {
			j, b, hasBatch := strings.Cut(churn, "/")
			join, err := strconv.Atoi(j)
			if err != nil || join < 0 {
				return nil, bad
			}
			sz.join = join
			if hasBatch {
				if sz.batch, err = strconv.Atoi(b); err != nil || sz.batch < 1 {
					return nil, bad
				}
			}
		}
		if sz.batch == 0 || sz.batch > sz.join {
			sz.batch = sz.join
		}
		if n := targetsAfterChurn(sz); n > maxChurnTargets {
			if sz.pools {
				return nil, fmt.Errorf("BENCH_SIZES=%q: %d nodes in %d pools make %d targets per load balancer, more than an lb11 takes (%d): use more Services (pools) or fewer nodes", s, sz.nodes+sz.join, sz.poolCount(), n, maxChurnTargets)
			}
			return nil, fmt.Errorf("BENCH_SIZES=%q: %d nodes joining make %d targets per load balancer, more than an lb11 takes (%d): join at most %d", s, sz.join, n, maxChurnTargets, maxChurnTargets-lbTargets)
		}
		out = append(out, sz)
	}
	return out, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// ccmBuildTags are the build tags of the Makefile (GO_BUILD_TAGS): the bench measures the binary
// that ships.
const ccmBuildTags = "grpcnotrace"

// ccmBinary returns $CCM_BIN, or a go build of ./cmd/hcloud-policy-ccm with ccmBuildTags, static
// and with trimmed paths as the Makefile (and the release) builds it.
func ccmBinary(t *testing.T) string {
	if bin := os.Getenv("CCM_BIN"); bin != "" {
		return bin
	}
	path := filepath.Join(t.TempDir(), "hcloud-policy-ccm")
	cmd := exec.Command("go", "build", "-trimpath", "-tags", ccmBuildTags, "-o", path, "../../cmd/hcloud-policy-ccm")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %s ./cmd/hcloud-policy-ccm: %v\n%s", ccmBuildTags, err, out)
	}
	return path
}

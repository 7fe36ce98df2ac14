// Command ccm-demo runs hcloud-policy-ccm on this machine against a real kube-apiserver and the
// Hetzner Cloud API emulator, prints what the CCM did, and keeps everything running to explore
// until Ctrl-C. `make demo` builds what it needs and runs it from the repository root.
//
// It starts, all on 127.0.0.1 and in one temporary directory:
//
//   - etcd and kube-apiserver, from --kube-bin-dir (built by `make kube-bins`), through
//     test/e2e/harness as the end-to-end tests do;
//   - the emulator (internal/hcloudemu, in process) seeded with --seed
//     (examples/emulator/seed.yaml: network k8s and five servers, one of them off), and beside
//     it the Robot webservice emulator (internal/robotemu) with the seed's one dedicated server;
//   - `kubectl apply -k deploy/`: ServiceAccount, RBAC and the policy ConfigMap
//     kube-system/hcloud-ccm-policies (the example policies of examples/policies);
//   - bin/hcloud-policy-ccm as that ServiceAccount with the container args of deploy/'s
//     Deployment, --policy-mode=enforce (deploy/ ships the swap-safe dry run; the demo shows a
//     denial, so it enforces explicitly), both example plugins (node-labels, lb-name), --cluster-name=demo,
//     HCLOUD_NETWORK=k8s, and HCLOUD_NETWORK_ROUTES_ENABLED=false with --configure-cloud-routes=false
//     (deploy/ runs no route controller; the flag keeps the upstream route controller from
//     warning that the cloud has no routes).
//
// With ROBOT_ENABLED=true and the Robot emulator's credentials, the cluster is mixed: the
// dedicated server is a node too (provider ID hrobot://<n>) and an IP target of the public
// load balancer.
//
// Then it registers a Node for each running seeded server, as a kubelet with
// --cloud-provider=external does, and creates three Services of type LoadBalancer:
// default/web (public, ports 80 and 443: allowed), shop/web (public in the unlabelled namespace
// shop: denied by exposure.rego) and shop/internal (private, on the network: allowed).
//
// It waits until the CCM has initialised every Node, both allowed Services have an external IP
// and the denial was reported (at most --timeout), and prints a report to stdout: nodes with
// provider ID, instance type, zone, plugin labels and addresses; Services with their external
// IPs and the load balancer's name (from the lb-name plugin) and ID; the policy's message of the
// denial; the Hetzner API requests the CCM made; and the commands to explore with kubectl and
// curl. Progress and errors go to stderr.
//
// Usage (from the repository root):
//
//	make demo
//	bin/ccm-demo --kube-bin-dir ~/.cache/hcloud-policy-ccm/kube-v1.37.2 --bin-dir bin
//
// Flags:
//
//	--kube-bin-dir       directory of kube-apiserver, etcd, kubectl (default $KUBE_BIN_DIR or
//	                     ~/.cache/hcloud-policy-ccm/kube-v1.37.2)
//	--bin-dir            directory of hcloud-policy-ccm and plugins/*.wasm.gz (default bin)
//	--ccm-bin            the CCM binary (default <bin-dir>/hcloud-policy-ccm)
//	--plugins-dir        node-labels.wasm.gz and lb-name.wasm.gz, or .wasm (default <bin-dir>/plugins)
//	--deploy-dir         the kustomization to apply (default deploy)
//	--seed               the emulator's seed (default examples/emulator/seed.yaml)
//	--emulator-listen    the emulator's address (default 127.0.0.1:0, a free port)
//	--timeout            how long to wait for convergence (default 60s)
//	--exit-after-report  exit after the report instead of waiting for Ctrl-C
//	--policies           your own policy directory, passed as the CCM's --policy-dir (with
//	                     --policy-configmap= to drop deploy/'s ConfigMap); default: the examples
//	--plugins            your own plugin directory: node-labels.wasm[.gz] and
//	                     load-balancer-name.wasm[.gz] (or lb-name.wasm[.gz]), each optional; none:
//	                     no plugins; default: both examples from --plugins-dir
//	--policy-mode        the CCM's --policy-mode, enforce (default) or dryrun
//	--routes             the route controller on: HCLOUD_NETWORK_ROUTES_ENABLED=true,
//	                     --configure-cloud-routes, --allocate-node-cidrs, --cluster-cidr=10.244.0.0/16;
//	                     Robot off and no dedicated Node (the CCM refuses routes with Robot);
//	                     the Nodes are registered with their InternalIP, as by kubelet --node-ip
//	--ccm-v              the CCM's --v (default: the Deployment's)
//
// make demo passes POLICIES, PLUGINS, MODE, ROUTES and V as these flags.
//
// # Your own policies and plugins
//
// With the examples (no --policies, no --plugins, --policy-mode=enforce) the demo waits for their
// outcome (plugin labels on every cloud Node, shop/web denied) and the report is the one above.
// With anything else (config.examples) it waits for every Node initialised and every Service
// with an address or a PolicyDenied event, and the report (writeServices) shows the setup, each
// Node's labels outside kubernetes.io, k8s.io and hetzner.cloud, and per Service its outcome,
// the policy's messages from its PolicyDenied, PolicyDryRunDenied and PolicyWarning events, the
// steps of its LoadBalancerCreated/Updated events, and its addresses. A Service with an address
// is never called denied by policy (TestVerdict, TestWriteReport, TestDemo).
//
// # Notes
//
//   - Ctrl-C (SIGINT) or SIGTERM stops the CCM, the emulator, kube-apiserver and etcd, removes
//     the temporary directory and the logs, and exits 0 (a second Ctrl-C exits at once; the
//     children die with the demo). If the demo did not converge or failed to start, the logs
//     are kept, their path and tails are printed, and the exit status is 1.
//   - The process logs are in the directory the report names (kept with E2E_KEEP_LOGS=1).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/robotemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// The identity and policy source of deploy/.
const (
	ccmNamespace      = "kube-system"
	ccmServiceAccount = "hcloud-cloud-controller-manager"
)

// Demo settings.
const (
	clusterName   = "demo"
	networkName   = "k8s" // the network of examples/emulator/seed.yaml
	emulatorToken = "demo-token"
	lbLocation    = "fsn1"
	// podCIDRBase is the /16 the Nodes' pod CIDRs (/24 each) come from.
	podCIDRBase = "10.244"
)

type config struct {
	kubeBinDir, binDir, ccmBin, pluginsDir, deployDir, seed, emulatorListen string
	timeout                                                                 time.Duration
	exitAfterReport                                                         bool
	// policies and plugins are your own policy directory and plugin directory ("none": no
	// plugins); empty: the examples. policyMode is --policy-mode; routes turns on the route
	// controller.
	policies, plugins, policyMode string
	routes                        bool
	ccmV                          int // the CCM's --v; -1: the Deployment's
}

// examples reports whether the demo runs the example policies and plugins in enforce mode: the
// setup whose outcome (which Service is denied, which labels the plugin sets) the report checks.
// Anything else gets the report of what happened (writeReport with examples false).
func (c config) examples() bool {
	return c.policies == "" && c.plugins == "" && c.policyMode == "enforce"
}

// validate checks the options that select policies, plugins and mode, naming the flag and the fix.
func (c config) validate() error {
	switch c.policyMode {
	case "enforce", "dryrun":
	default:
		return fmt.Errorf("invalid --policy-mode %q (make demo MODE=...): expect enforce or dryrun", c.policyMode)
	}
	if c.policies != "" {
		st, err := os.Stat(c.policies)
		if err != nil || !st.IsDir() {
			return fmt.Errorf("--policies %q (make demo POLICIES=...) is not a directory: pass a directory of *.rego and data files", c.policies)
		}
	}
	if c.plugins != "" && c.plugins != "none" {
		st, err := os.Stat(c.plugins)
		if err != nil || !st.IsDir() {
			return fmt.Errorf("--plugins %q (make demo PLUGINS=...) is not a directory: pass a directory with node-labels.wasm[.gz] and/or load-balancer-name.wasm[.gz], or none", c.plugins)
		}
	}
	return nil
}

func main() {
	var cfg config
	fs := flag.NewFlagSet("ccm-demo", flag.ExitOnError)
	fs.StringVar(&cfg.kubeBinDir, "kube-bin-dir", harness.BinDir(), "directory of kube-apiserver, etcd and kubectl (make kube-bins)")
	fs.StringVar(&cfg.binDir, "bin-dir", "bin", "directory of hcloud-policy-ccm and plugins/*.wasm.gz (make build plugins)")
	fs.StringVar(&cfg.ccmBin, "ccm-bin", "", "the CCM binary (default <bin-dir>/hcloud-policy-ccm)")
	fs.StringVar(&cfg.pluginsDir, "plugins-dir", "", "directory of node-labels.wasm.gz and lb-name.wasm.gz (default <bin-dir>/plugins)")
	fs.StringVar(&cfg.deployDir, "deploy-dir", "deploy", "kustomization with the ServiceAccount, RBAC, policies and Deployment")
	fs.StringVar(&cfg.seed, "seed", filepath.Join("examples", "emulator", "seed.yaml"), "seed of the Hetzner API emulator")
	fs.StringVar(&cfg.emulatorListen, "emulator-listen", "127.0.0.1:0", "listen address of the Hetzner API emulator")
	fs.DurationVar(&cfg.timeout, "timeout", time.Minute, "how long to wait for the CCM to converge")
	fs.BoolVar(&cfg.exitAfterReport, "exit-after-report", false, "exit after the report (status 1 if the demo did not converge)")
	fs.StringVar(&cfg.policies, "policies", "", "your own policy directory (*.rego, data files) instead of the example ConfigMap")
	fs.StringVar(&cfg.plugins, "plugins", "", "your own plugin directory (node-labels.wasm[.gz], load-balancer-name.wasm[.gz] or lb-name.wasm[.gz]; each optional), or none, instead of the examples")
	fs.StringVar(&cfg.policyMode, "policy-mode", "enforce", "the CCM's --policy-mode: enforce or dryrun")
	fs.IntVar(&cfg.ccmV, "ccm-v", -1, "the CCM's log verbosity (--v); -1: the Deployment's")
	fs.BoolVar(&cfg.routes, "routes", false, "run the route controller (HCLOUD_NETWORK_ROUTES_ENABLED=true, --allocate-node-cidrs, --cluster-cidr=10.244.0.0/16)")
	_ = fs.Parse(os.Args[1:]) // ExitOnError
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "ccm-demo: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}
	if cfg.ccmBin == "" {
		cfg.ccmBin = filepath.Join(cfg.binDir, "hcloud-policy-ccm")
	}
	if cfg.pluginsDir == "" {
		cfg.pluginsDir = filepath.Join(cfg.binDir, "plugins")
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "ccm-demo: %v\n", err)
		os.Exit(2)
	}

	r := newRunner(os.Stderr)
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	stop := make(chan struct{})
	go func() {
		<-signals
		close(stop)
		go func() {
			<-signals
			r.Logf("second signal: exiting now")
			os.Exit(1)
		}()
		r.Logf("stopping (Ctrl-C again to exit at once)")
		code := 0
		if r.Failed() {
			code = 1
		}
		r.exit(code)
	}()

	converged, ccm := run(r, cfg, os.Stdout)
	if !converged {
		r.fail() // keep the logs
	}
	if cfg.exitAfterReport {
		code := 0
		if !converged {
			code = 1
		}
		r.exit(code)
	}
	select {
	case <-stop:
		select {} // the signal goroutine stops everything and exits
	case <-ccm.Done():
		_, err := ccm.Exited()
		r.Fatalf("hcloud-policy-ccm exited (%v); its log is %s", err, ccm.LogPath)
	}
}

// run starts everything, waits for convergence and prints the report to out. It reports whether
// the demo converged, and returns the CCM's process; errors that stop the demo end in r.Fatalf.
func run(r *runner, cfg config, out io.Writer) (bool, *harness.Process) {
	// Check the inputs first, so a missing build fails in a second with the command to run.
	if err := os.Setenv("KUBE_BIN_DIR", cfg.kubeBinDir); err != nil {
		r.Fatalf("set KUBE_BIN_DIR: %v", err)
	}
	if _, err := os.Stat(cfg.ccmBin); err != nil {
		r.Fatalf("%v: run `make build` (or pass --bin-dir or --ccm-bin)", err)
	}
	plugins := selectPlugins(r, cfg)
	if cfg.policies != "" {
		abs, err := filepath.Abs(cfg.policies)
		if err != nil {
			r.Fatalf("--policies: %v", err)
		}
		cfg.policies = abs
	}
	if st, err := os.Stat(filepath.Join(cfg.deployDir, "kustomization.yaml")); err != nil || st.IsDir() {
		r.Fatalf("no kustomization.yaml in --deploy-dir=%s: run the demo from the repository root (make demo)", cfg.deployDir)
	}
	seed, err := hcloudemu.LoadSeedFile(cfg.seed)
	if err != nil {
		r.Fatalf("emulator seed: %v", err)
	}
	for _, name := range []string{"kube-apiserver", "etcd", "kubectl"} {
		harness.Bin(r, name)
	}
	start := time.Now()

	// 1. The control plane.
	r.Logf("starting etcd and kube-apiserver from %s", cfg.kubeBinDir)
	c := harness.Start(r)

	// 2. The Hetzner API emulator.
	emu, robot, endpoint := startEmulator(r, cfg.emulatorListen, seed)
	r.Logf("Hetzner API emulator on %s, Robot webservice emulator on %s", endpoint, robotemu.EndpointBeside(endpoint))

	// 3. deploy/ and the Nodes of the running seeded servers (registered before the CCM starts,
	// so that on exit the CCM stops before the Nodes are deleted).
	r.Logf("applying %s", cfg.deployDir)
	c.ApplyKustomize(r, cfg.deployDir)
	var nodes []string
	var nodeIPs map[string]string
	if cfg.routes {
		nodeIPs = networkIPs(emu, seed, networkName)
	}
	for _, s := range seed.Servers {
		if s.Status != "" && s.Status != "running" {
			continue
		}
		var opts []harness.NodeOption
		if ip := nodeIPs[s.Name]; ip != "" {
			opts = append(opts, harness.WithInternalIP(ip))
		}
		c.CreateNode(r, s.Name, fmt.Sprintf("%s.%d.0/24", podCIDRBase, len(nodes)+1), opts...)
		nodes = append(nodes, s.Name)
	}
	if seed.Robot != nil && !cfg.routes { // the CCM refuses routes with Robot
		for _, s := range seed.Robot.Servers { // dedicated servers: a mixed cluster
			c.CreateNode(r, s.Name, fmt.Sprintf("%s.%d.0/24", podCIDRBase, len(nodes)+1))
			nodes = append(nodes, s.Name)
		}
	}
	r.Logf("registered nodes %s", strings.Join(nodes, ", "))

	// 4. The CCM, as the ServiceAccount of deploy/, with the Deployment's args.
	ccm, metricsAddr := startCCM(r, c, cfg, plugins, endpoint, emu.Token(), robot)
	r.Logf("started hcloud-policy-ccm (log %s)", ccm.LogPath)

	// 5. The Services, once the CCM has initialised the nodes (see waitInitialised).
	waitInitialised(r, c, ccm, nodes, cfg.timeout)
	services := createServices(r, c)

	// 6. Convergence, then the report.
	r.Logf("waiting up to %s for the CCM", cfg.timeout)
	st, converged := waitConverged(r, c, emu, ccm, nodes, services, cfg.examples(), cfg.timeout)
	st.robotRequests = robot.Requests()
	st.cost = &demoCost{}
	if prices, err := readPrices(endpoint, emu.Token()); err != nil { // after the counts: it is a request too
		st.cost.err = err
	} else {
		st.cost.inventory = costOf(emu.LoadBalancers(), st.services, prices)
	}
	env := exploreEnv{
		kubectl:     harness.Bin(r, "kubectl"),
		kubeconfig:  c.Kubeconfig,
		endpoint:    endpoint,
		token:       emu.Token(),
		metricsAddr: metricsAddr,
		logDir:      harness.LogDir(r),
		ccmLog:      ccm.LogPath,
	}
	env.examples = cfg.examples()
	env.setup = describeSetup(cfg, plugins)
	env.policyDir = cfg.policies
	writeReport(out, st, converged, time.Since(start), env, cfg.exitAfterReport)
	return converged, ccm
}

// selectPlugins returns the CCM's plugin flags and files: both example plugins from
// cfg.pluginsDir (each required), or with --plugins those of that directory that exist (none:
// no plugins; a directory with neither file is an error naming the file names).
func selectPlugins(r *runner, cfg config) map[string]string {
	if cfg.plugins == "" {
		return map[string]string{
			"--plugin-node-labels":        pluginFile(r, cfg.pluginsDir, "node-labels"),
			"--plugin-load-balancer-name": pluginFile(r, cfg.pluginsDir, "lb-name"),
		}
	}
	plugins := map[string]string{}
	if cfg.plugins == "none" {
		return plugins
	}
	for flag, names := range map[string][]string{
		"--plugin-node-labels":        {"node-labels"},
		"--plugin-load-balancer-name": {"load-balancer-name", "lb-name"},
	} {
		for _, name := range names {
			if f := findPlugin(cfg.plugins, name); f != "" {
				plugins[flag] = f
				break
			}
		}
	}
	if len(plugins) == 0 {
		r.Fatalf("--plugins %s has neither node-labels.wasm[.gz] nor load-balancer-name.wasm[.gz] (or lb-name.wasm[.gz]): name your plugins so, or pass --plugins=none (make demo PLUGINS=none)", cfg.plugins)
	}
	return plugins
}

// pluginFile returns dir/name.wasm.gz, or dir/name.wasm if only that exists.
func pluginFile(r *runner, dir, name string) string {
	if f := findPlugin(dir, name); f != "" {
		return f
	}
	r.Fatalf("plugin %s not found in %s: run `make plugins` (or pass --bin-dir or --plugins-dir)", name+".wasm.gz", dir)
	return ""
}

// findPlugin returns dir/name.wasm.gz or dir/name.wasm, whichever exists first, or "".
func findPlugin(dir, name string) string {
	gz := filepath.Join(dir, name+".wasm.gz")
	for _, f := range []string{gz, strings.TrimSuffix(gz, ".gz")} {
		if _, err := os.Stat(f); err == nil {
			abs, err := filepath.Abs(f)
			if err != nil {
				return f
			}
			return abs
		}
	}
	return ""
}

// describeSetup is the report's line on what the CCM runs with.
func describeSetup(cfg config, plugins map[string]string) string {
	policies := "the example policies (ConfigMap kube-system/hcloud-ccm-policies)"
	if cfg.policies != "" {
		policies = "policies from " + cfg.policies
	}
	var ps []string
	for _, flag := range slices.Sorted(maps.Keys(plugins)) {
		ps = append(ps, strings.TrimPrefix(flag, "--plugin-")+"="+filepath.Base(plugins[flag]))
	}
	plug := "no plugins"
	if len(ps) > 0 {
		plug = "plugins " + strings.Join(ps, ", ")
	}
	routes := "off"
	if cfg.routes {
		routes = "on"
	}
	return fmt.Sprintf("%s, --policy-mode=%s, %s, routes %s", policies, cfg.policyMode, plug, routes)
}

// networkIPs maps the name of each seeded server with an ID to its IP in the network named
// network, as the emulator assigned it (a seeded IP, or the next free one).
//
// With --routes the demo registers each such Node as a kubelet started with
// --cloud-provider=external --node-ip=<that IP> does (harness.WithInternalIP): the InternalIP is
// in the Node's addresses from the start. The route controller creates a Node's route as soon as
// the Node has a pod CIDR, and the gateway must be one of the route's InternalIPs
// (routes.CreateRoute, as the official CCM's CreateRoute; docs/reference/differences.md lists no
// difference there). Registered with its hostname only, each Node got a FailedToCreateRoute
// "has no InternalIP yet" until the CCM initialised it: four warnings at every start of the
// demo. A server seeded without an ID is left out; its Node still waits for the CCM.
func networkIPs(emu *hcloudemu.Emulator, seed hcloudemu.Seed, network string) map[string]string {
	var netID int64
	for _, n := range seed.Networks {
		if n.Name == network {
			netID = n.ID
		}
	}
	ips := map[string]string{}
	if netID == 0 {
		return ips
	}
	for _, s := range seed.Servers {
		srv, ok := emu.Server(s.ID)
		if s.ID == 0 || !ok {
			continue
		}
		for _, pn := range srv.PrivateNet {
			if pn.Network == netID && pn.IP != "" {
				ips[s.Name] = pn.IP
			}
		}
	}
	return ips
}

// startEmulator serves the emulator seeded with seed on listen until the demo exits, with the
// Robot webservice emulator (seed.Robot) under /robot on the same listener, and returns both
// with the cloud endpoint (http://ADDR/v1).
func startEmulator(r *runner, listen string, seed hcloudemu.Seed) (*hcloudemu.Emulator, *robotemu.Emulator, string) {
	emu := hcloudemu.New(hcloudemu.WithToken(emulatorToken), hcloudemu.WithSeed(seed), hcloudemu.WithLogf(r.Logf))
	if err := emu.SeedError(); err != nil {
		r.Fatalf("emulator seed: %v", err)
	}
	var robotSeed robotemu.Seed
	if seed.Robot != nil {
		robotSeed = *seed.Robot
	}
	robot, err := robotemu.New(robotSeed)
	if err != nil {
		r.Fatalf("emulator seed: %v", err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		r.Fatalf("emulator: listen on %s: %v", listen, err)
	}
	srv := &http.Server{Handler: robotemu.Beside(emu.Handler(), robot), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ends with Close
	r.Cleanup(func() { _ = srv.Close() })
	return emu, robot, "http://" + ln.Addr().String() + "/v1"
}

// startCCM runs the CCM out of cluster like test/e2e's startCCM: the container args of the
// Deployment of cfg.deployDir, plus the ServiceAccount's kubeconfig for the API and delegated
// authn/authz, a free secure port on loopback, the plugins, and the emulator in place of the
// Secret. It returns the process and the metrics address.
func startCCM(r *runner, c *harness.Cluster, cfg config, plugins map[string]string, endpoint, token string, robot *robotemu.Emulator) (*harness.Process, string) {
	args := deploymentArgs(r, cfg.deployDir)
	kubeconfig := c.ServiceAccountKubeconfig(r, ccmNamespace, ccmServiceAccount)
	metricsAddr := "127.0.0.1:" + strconv.Itoa(harness.FreePort(r))
	args = append(args,
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--secure-port="+strconv.Itoa(harness.FreePort(r)),
		"--bind-address=127.0.0.1",
		"--cluster-name="+clusterName,
		// deploy/ ships the policies in dry run (swap-safe); the demo shows a denial, so it
		// enforces explicitly unless --policy-mode says otherwise (the later flag wins).
		"--policy-mode="+cfg.policyMode,
	)
	if cfg.ccmV >= 0 {
		args = append(args, "--v="+strconv.Itoa(cfg.ccmV))
	}
	if cfg.policies != "" {
		// Your directory replaces the ConfigMap of deploy/ (the CCM takes one source).
		args = append(args, "--policy-configmap=", "--policy-dir="+cfg.policies)
	}
	if cfg.routes {
		// As deploy/networks/: the route controller needs both; the Nodes' pod CIDRs are in this range.
		args = append(args, "--configure-cloud-routes=true", "--allocate-node-cidrs=true", "--cluster-cidr="+podCIDRBase+".0.0/16")
	} else {
		// No routes (see HCLOUD_NETWORK_ROUTES_ENABLED below): without this flag (default true)
		// the upstream route controller logs the warning "--configure-cloud-routes is set, but
		// cloud provider does not support routes".
		args = append(args, "--configure-cloud-routes=false")
	}
	for _, flag := range slices.Sorted(maps.Keys(plugins)) {
		args = append(args, flag+"="+plugins[flag])
	}
	env := []string{
		"HCLOUD_TOKEN=" + token,
		"HCLOUD_ENDPOINT=" + endpoint,
		"HCLOUD_NETWORK=" + networkName,
		"HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK=true", // this machine is not a server in that network
		// Routes need --allocate-node-cidrs and --cluster-cidr (deploy/networks/); deploy/ has
		// neither, so they are on only with --routes, which adds both.
		"HCLOUD_NETWORK_ROUTES_ENABLED=" + strconv.FormatBool(cfg.routes),
		"HCLOUD_LOAD_BALANCERS_LOCATION=" + lbLocation,
		"HCLOUD_LOAD_BALANCERS_TYPE=lb11",
		"HCLOUD_METRICS_ADDRESS=" + metricsAddr,
		// Robot (dedicated servers), as the official CCM reads it; only the endpoint is ours.
		// Off with routes: the CCM (as the official one) refuses routes with Robot.
		"ROBOT_ENABLED=" + strconv.FormatBool(!cfg.routes),
		"ROBOT_USER=" + robot.User(),
		"ROBOT_PASSWORD=" + robot.Password(),
		"ROBOT_ENDPOINT=" + robotemu.EndpointBeside(endpoint),
	}
	return harness.StartProcess(r, "hcloud-policy-ccm", cfg.ccmBin, args, env), metricsAddr
}

// deploymentArgs returns the container args of the Deployment that `kubectl kustomize dir`
// renders.
func deploymentArgs(r *runner, dir string) []string {
	for _, doc := range strings.Split(harness.Kustomize(r, dir), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil || meta.Kind != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			r.Fatalf("kubectl kustomize %s: Deployment: %v", dir, err)
		}
		if cs := d.Spec.Template.Spec.Containers; len(cs) > 0 {
			return slices.Clone(cs[0].Args)
		}
	}
	r.Fatalf("kubectl kustomize %s renders no Deployment with a container", dir)
	return nil
}

// demoService is one Service the demo creates and what it should lead to.
type demoService struct {
	namespace, name string
	// denied: the policy denies it, and the report shows the message instead of an IP.
	denied bool
	// note says what the Service shows.
	note string
}

func (s demoService) key() string { return s.namespace + "/" + s.name }

// createServices creates the namespace shop (no labels: it may not expose load balancers
// publicly) and the three Services.
func createServices(r *runner, c *harness.Cluster) []demoService {
	ctx := context.Background()
	if _, err := c.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		r.Fatalf("create namespace shop: %v", err)
	}
	httpPort := corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}
	httpsPort := corev1.ServicePort{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: corev1.ProtocolTCP}
	list := []struct {
		demoService
		ports       []corev1.ServicePort
		annotations map[string]string
	}{
		{demoService: demoService{namespace: "default", name: "web", note: "public"}, ports: []corev1.ServicePort{httpPort, httpsPort}},
		{demoService: demoService{namespace: "shop", name: "web", denied: true, note: "public in namespace shop"}, ports: []corev1.ServicePort{httpPort}},
		{demoService: demoService{namespace: "shop", name: "internal", note: "private, network " + networkName}, ports: []corev1.ServicePort{httpPort},
			annotations: map[string]string{
				"load-balancer.hetzner.cloud/disable-public-network": "true",
				"load-balancer.hetzner.cloud/use-private-ip":         "true",
				// Cloud nodes only: the dedicated server has no IP in the network (no vSwitch), and
				// a load balancer without public interface cannot reach its public IP.
				"load-balancer.hetzner.cloud/node-selector": "instance.hetzner.cloud/provided-by=cloud",
			}},
	}
	var out []demoService
	for _, s := range list {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.name, Annotations: s.annotations},
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeLoadBalancer,
				Selector: map[string]string{"app": s.name},
				Ports:    s.ports,
			},
		}
		if _, err := c.Client().CoreV1().Services(s.namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			r.Fatalf("create service %s: %v", s.key(), err)
		}
		out = append(out, s.demoService)
	}
	r.Logf("created services %s", strings.Join(func() []string {
		var keys []string
		for _, s := range out {
			keys = append(keys, s.key())
		}
		return keys
	}(), ", "))
	return out
}

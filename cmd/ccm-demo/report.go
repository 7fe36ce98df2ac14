package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// pluginLabelPrefix is the label namespace of the example node-labels plugin.
const pluginLabelPrefix = "node.hcloud.example/"

// state is what the report shows.
type state struct {
	nodes    []nodeState
	services []serviceState
	// requests and mutating count the emulator's API requests since it started; mutatingRoutes
	// has the mutating ones per route ("POST /v1/load_balancers").
	requests, mutating int
	mutatingRoutes     map[string]int
	// robotRequests counts the Robot webservice emulator's requests per path pattern.
	robotRequests map[string]int
	// pending says what has not converged yet; empty when the demo converged.
	pending []string
	// nodeWarnings sums up the Warning events on the Nodes (summarizeNodeWarnings).
	nodeWarnings []string
	// cost is what the CCM's load balancers cost a month (nil: not priced).
	cost *demoCost
}

type nodeState struct {
	name, providerID, instanceType, zone string
	pluginLabels, addresses              []string
}

type serviceState struct {
	demoService
	ingress []string
	lbName  string
	lbID    int64
	// ipTargets are the load balancer's IP targets: the Robot nodes.
	ipTargets []string
	denial    string // message of the latest PolicyDenied event
	warnings  []string
	// events sums up the Service's events: what the policy decided and what the CCM applied.
	events serviceEvents
}

// serviceEvents is what a Service's events say, each list oldest first.
type serviceEvents struct {
	denied, dryRunDenied, warnings []string // PolicyDenied, PolicyDryRunDenied, PolicyWarning messages
	// applied has the operations of the LoadBalancerCreated/Updated events ("create(NAME)",
	// "add_service(80)"), in the order they ran.
	applied []string
	// failure is the message of the latest SyncLoadBalancerFailed event, if it is newer than
	// the latest LoadBalancerCreated/Updated event (a failure the CCM has since overcome is not
	// shown).
	failure string
}

// reasonSyncFailed is the upstream service controller's event reason for a failed reconcile.
const reasonSyncFailed = "SyncLoadBalancerFailed"

// operationLabel matches one operation of an "applied: ..." event: "add_target(server:101)".
var operationLabel = regexp.MustCompile(`[a-z_]+\([^()]*\)`)

// summarizeEvents sorts events by time (stable) and sums them up; events of other reasons are
// ignored.
func summarizeEvents(events []corev1.Event) serviceEvents {
	events = slices.Clone(events)
	slices.SortStableFunc(events, func(a, b corev1.Event) int { return a.LastTimestamp.Time.Compare(b.LastTimestamp.Time) })
	var se serviceEvents
	for _, ev := range events {
		switch ev.Reason {
		case executor.ReasonPolicyDenied:
			se.denied = append(se.denied, ev.Message)
		case executor.ReasonPolicyDryRunDenied:
			se.dryRunDenied = append(se.dryRunDenied, ev.Message)
		case executor.ReasonPolicyWarning:
			se.warnings = append(se.warnings, ev.Message)
		case executor.ReasonLoadBalancerCreated, executor.ReasonLoadBalancerUpdated:
			msg := strings.TrimPrefix(ev.Message, "applied: ")
			ops := operationLabel.FindAllString(msg, -1)
			if len(ops) == 0 {
				ops = []string{msg}
			}
			se.applied = append(se.applied, ops...)
			se.failure = ""
		case reasonSyncFailed:
			se.failure = ev.Message
		}
	}
	return se
}

// verdict says in a few words what happened to s. It calls a Service "denied by policy" only
// while it has no address (TestVerdict).
func (s serviceState) verdict() string {
	e := s.events
	switch {
	case len(s.ingress) > 0 && len(e.dryRunDenied) > 0:
		return "allowed in dry run: the policy denied, the CCM applied it anyway"
	case len(s.ingress) > 0 && len(e.denied) > 0:
		return "has an address; a later change was denied by policy"
	case len(s.ingress) > 0:
		return "allowed"
	case len(e.denied) > 0:
		return "denied by policy"
	case e.failure != "":
		return "not reconciled: " + e.failure
	default:
		return "pending"
	}
}

// waitConverged collects the state every half second until it has converged or timeout passes,
// and returns the last state. It ends the demo with the CCM's log tail if the CCM exits.
//
// With examples, it waits for what the example policies and plugins lead to (plugin labels on
// every cloud node, shop/web denied, the others with an address); otherwise for every node
// initialised and every Service with an address or a PolicyDenied event.
func waitConverged(r *runner, c *harness.Cluster, emu *hcloudemu.Emulator, ccm *harness.Process, nodes []string, services []demoService, examples bool, timeout time.Duration) (state, bool) {
	deadline := time.Now().Add(timeout)
	for {
		if exited, err := ccm.Exited(); exited {
			r.Fatalf("hcloud-policy-ccm exited (%v); its log is %s", err, ccm.LogPath)
		}
		st := collect(c, emu, nodes, services, examples)
		if len(st.pending) == 0 {
			// The service controller may still be adding targets: report once the emulator has
			// seen no request for a second (at most 5 s more).
			waitQuiet(emu, time.Second, 5*time.Second)
			return collect(c, emu, nodes, services, examples), true
		}
		if time.Now().After(deadline) {
			return st, false
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitQuiet returns once emu has received no request for quiet, or after limit.
func waitQuiet(emu *hcloudemu.Emulator, quiet, limit time.Duration) {
	total := func() int {
		n := 0
		for _, c := range emu.Counts() {
			n += c
		}
		return n
	}
	deadline := time.Now().Add(limit)
	last, since := total(), time.Now()
	for time.Since(since) < quiet && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if n := total(); n != last {
			last, since = n, time.Now()
		}
	}
}

// collect reads the Nodes, Services, events and load balancers, and what is still missing.
func collect(c *harness.Cluster, emu *hcloudemu.Emulator, nodes []string, services []demoService, examples bool) state {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := c.Client()
	var st state
	for _, name := range nodes {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			st.pending = append(st.pending, fmt.Sprintf("node %s: %v", name, err))
			st.nodes = append(st.nodes, nodeState{name: name})
			continue
		}
		ns := nodeState{
			name:         name,
			providerID:   n.Spec.ProviderID,
			instanceType: n.Labels[corev1.LabelInstanceTypeStable],
			zone:         n.Labels[corev1.LabelTopologyZone],
		}
		for _, k := range slices.Sorted(maps.Keys(n.Labels)) {
			if !examples {
				if !wellKnownLabel(k) {
					ns.pluginLabels = append(ns.pluginLabels, k+"="+n.Labels[k])
				}
			} else if rest, ok := strings.CutPrefix(k, pluginLabelPrefix); ok {
				ns.pluginLabels = append(ns.pluginLabels, rest+"="+n.Labels[k])
			}
		}
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeHostName {
				ns.addresses = append(ns.addresses, a.Address)
			}
		}
		switch {
		case !initialised(n):
			st.pending = append(st.pending, fmt.Sprintf("node %s is not initialised (providerID %q)", name, ns.providerID))
		case examples && len(ns.pluginLabels) == 0 && n.Labels["instance.hetzner.cloud/provided-by"] != "robot": // the plugin serves cloud servers
			st.pending = append(st.pending, fmt.Sprintf("node %s has no %s* labels from the node-labels plugin", name, pluginLabelPrefix))
		}
		st.nodes = append(st.nodes, ns)
	}

	st.nodeWarnings = summarizeNodeWarnings(listNodeWarnings(ctx, c))

	lbs := emu.LoadBalancers()
	for _, s := range services {
		ss := serviceState{demoService: s}
		svc, err := client.CoreV1().Services(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
		if err != nil {
			st.pending = append(st.pending, fmt.Sprintf("service %s: %v", s.key(), err))
			st.services = append(st.services, ss)
			continue
		}
		for _, in := range svc.Status.LoadBalancer.Ingress {
			ss.ingress = append(ss.ingress, in.IP+in.Hostname)
		}
		for _, lb := range lbs {
			if lb.Labels[lbplan.LabelServiceUID] == string(svc.UID) {
				ss.lbName, ss.lbID = lb.Name, lb.ID
				for _, t := range lb.Targets {
					if t.Type == "ip" && t.IP != nil {
						ss.ipTargets = append(ss.ipTargets, t.IP.IP)
					}
				}
			}
		}
		ss.events = summarizeEvents(listServiceEvents(ctx, c, s))
		if d := ss.events.denied; len(d) > 0 {
			ss.denial = d[len(d)-1]
		}
		ss.warnings = ss.events.warnings
		switch {
		case !examples:
			if len(ss.ingress) == 0 && ss.denial == "" {
				msg := fmt.Sprintf("service %s has no external IP and no %s event yet", s.key(), executor.ReasonPolicyDenied)
				if f := ss.events.failure; f != "" {
					msg += " (" + reasonSyncFailed + ": " + f + ")"
				}
				st.pending = append(st.pending, msg)
			}
		case s.denied && ss.denial == "":
			st.pending = append(st.pending, fmt.Sprintf("service %s: no %s event yet", s.key(), executor.ReasonPolicyDenied))
		case s.denied && ss.lbID != 0:
			st.pending = append(st.pending, fmt.Sprintf("service %s: has load balancer %d although the policy denies it", s.key(), ss.lbID))
		case !s.denied && len(ss.ingress) == 0:
			msg := fmt.Sprintf("service %s has no external IP yet", s.key())
			if ss.denial != "" {
				msg += " (denied: " + ss.denial + ")"
			}
			st.pending = append(st.pending, msg)
		}
		st.services = append(st.services, ss)
	}

	counts := emu.Counts()
	st.mutatingRoutes = map[string]int{}
	for route, n := range counts {
		st.requests += n
		if method, _, _ := strings.Cut(route, " "); method == "POST" || method == "PUT" || method == "DELETE" {
			st.mutatingRoutes[route] += n
		}
	}
	st.mutating = emu.MutatingRequests()
	return st
}

// listServiceEvents returns the events on the Service (none if the list fails: the next collect
// tries again).
func listServiceEvents(ctx context.Context, c *harness.Cluster, s demoService) []corev1.Event {
	events, err := c.Client().CoreV1().Events(s.namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": "Service", "involvedObject.name": s.name}.String(),
	})
	if err != nil {
		return nil
	}
	return events.Items
}

// initialised reports whether the CCM has initialised the node: a provider ID, and no
// uninitialized taint.
func initialised(n *corev1.Node) bool {
	tainted := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == harness.TaintUninitialized })
	return n.Spec.ProviderID != "" && !tainted
}

// waitInitialised waits until the CCM has initialised every node, or timeout passes (then the
// report says which node is not). It ends the demo with the CCM's log if the CCM exits.
//
// # Why wait before creating the Services?
//
// The upstream service controller passes every Node to the CCM, initialised or not, and the CCM
// (like the official one, internal/hcops/load_balancer.go) warns UnknownProviderIDPrefix on each
// node without a provider ID at every sync: Services created while the CCM initialises the
// nodes got about 12 such events in the demo (docs/reference/differences.md). In a cluster the
// nodes are initialised long before workloads arrive; the demo now starts the same way.
func waitInitialised(r *runner, c *harness.Cluster, ccm *harness.Process, nodes []string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		if exited, err := ccm.Exited(); exited {
			r.Fatalf("hcloud-policy-ccm exited (%v); its log is %s", err, ccm.LogPath)
		}
		if allInitialised(c, nodes) {
			return
		}
		if time.Now().After(deadline) {
			r.Logf("the CCM has not initialised every node after %s; creating the Services anyway (the report says which node is missing)", timeout)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// allInitialised reports whether every node is initialised (false if one cannot be read).
func allInitialised(c *harness.Cluster, nodes []string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range nodes {
		n, err := c.Client().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil || !initialised(n) {
			return false
		}
	}
	return true
}

// listNodeWarnings returns the Warning events on Nodes (none if the list fails: the next collect
// tries again). Events on a Node are recorded in the default namespace.
func listNodeWarnings(ctx context.Context, c *harness.Cluster) []corev1.Event {
	events, err := c.Client().CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": "Node", "type": corev1.EventTypeWarning}.String(),
	})
	if err != nil {
		return nil
	}
	return events.Items
}

// summarizeNodeWarnings returns one line per node and reason, sorted: "worker-1:
// UnknownProviderIDPrefix (3x): MESSAGE" with the number of occurrences (an event's count, the
// API server folds repeats into one event) and the latest message.
func summarizeNodeWarnings(events []corev1.Event) []string {
	type key struct{ node, reason string }
	counts := map[key]int32{}
	latest := map[key]corev1.Event{}
	for _, e := range events {
		k := key{e.InvolvedObject.Name, e.Reason}
		counts[k] += max(e.Count, 1)
		if prev, ok := latest[k]; !ok || prev.LastTimestamp.Before(&e.LastTimestamp) {
			latest[k] = e
		}
	}
	lines := make([]string, 0, len(counts))
	for k, n := range counts {
		lines = append(lines, fmt.Sprintf("%s: %s (%dx): %s", k.node, k.reason, n, latest[k].Message))
	}
	slices.Sort(lines)
	return lines
}

// wellKnownLabel reports whether a Node label key belongs to Kubernetes or the CCM itself
// (kubernetes.io, k8s.io and hetzner.cloud, with their subdomains), not to a plugin.
func wellKnownLabel(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, d := range []string{"kubernetes.io", "k8s.io", "hetzner.cloud"} {
		if prefix == d || strings.HasSuffix(prefix, "."+d) {
			return true
		}
	}
	return false
}

// finding is one policy message and the operations (or Services) it was reported for.
type finding struct {
	msg      string
	subjects []string
}

// operationPrefix matches the operation before each message of a policy event, as the executor
// writes them: "create(NAME): ", "add_service(80): ", "add_target(server:101): ".
var operationPrefix = regexp.MustCompile(`([a-z_]+\([^()]*\)): `)

// splitPolicyEvent splits the message of a PolicyDenied or PolicyWarning event
// ("[nothing changed: ]op: msg; op: msg; ...") into distinct messages, each with its operations,
// in order of first appearance. A message it cannot split is returned whole.
func splitPolicyEvent(event string) []finding {
	event = deniedPart(strings.TrimPrefix(event, "nothing changed: "))
	idx := operationPrefix.FindAllStringSubmatchIndex(event, -1)
	if len(idx) == 0 || idx[0][0] != 0 {
		return []finding{{msg: event}}
	}
	var out []finding
	for i, m := range idx {
		end := len(event)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		op := event[m[2]:m[3]]
		msg := strings.TrimSuffix(strings.TrimSpace(event[m[1]:end]), ";")
		out = addFinding(out, msg, op)
	}
	return out
}

// deniedPart is the denied messages of a PolicyDenied event of steps that failed alone
// ("applied: STEPS; denied: MESSAGES[; skipped: STEPS]"); any other event is returned as it is.
func deniedPart(event string) string {
	if !strings.HasPrefix(event, "applied: ") {
		return event
	}
	if _, denied, ok := strings.Cut(event, "; denied: "); ok {
		event = denied
	}
	event, _, _ = strings.Cut(event, "; skipped: ")
	return event
}

// groupedPart matches one message of a policy event as the executor groups them (see
// ccm/executor's messageGroups): "TEXT: for STEP, STEP[ and N more steps]", followed by "; " or
// the end; a STEP may be followed by its " (decision ID)".
var groupedPart = regexp.MustCompile(`(.*?): for ((?:[a-z_]+\([^()]*\)(?: \(decision [^()]*\))?)(?:, [a-z_]+\([^()]*\)(?: \(decision [^()]*\))?)*(?: and \d+ more steps)?)(?:; |$)`)

// decisionSuffix matches the " (decision ID)" after a step's label.
var decisionSuffix = regexp.MustCompile(` \(decision [^()]*\)`)

// splitGroupedEvent splits the message of a PolicyDenied, PolicyDryRunDenied or PolicyWarning
// event in the executor's grouped form ("[nothing changed: |would be denied (dry run): ]TEXT: for
// STEP, STEP; TEXT: for STEP") into its messages, each with its steps. A message it cannot
// split completely is returned whole, without steps.
//
// A PolicyDenied event of steps that failed alone ("applied: STEPS; denied: MESSAGES[;
// skipped: STEPS]") is split into its denied messages.
func splitGroupedEvent(event string) []finding {
	for _, prefix := range []string{"nothing changed: ", "would be denied (dry run): "} {
		event = strings.TrimPrefix(event, prefix)
	}
	event = deniedPart(event)
	var out []finding
	rest := event
	for rest != "" {
		m := groupedPart.FindStringSubmatchIndex(rest)
		if m == nil || m[0] != 0 {
			return []finding{{msg: event}}
		}
		msg, steps := rest[m[2]:m[3]], rest[m[4]:m[5]]
		for _, step := range strings.Split(decisionSuffix.ReplaceAllString(steps, ""), ", ") {
			out = addFinding(out, msg, step)
		}
		rest = rest[m[1]:]
	}
	if len(out) == 0 {
		return []finding{{msg: event}}
	}
	return out
}

// addFinding adds what to the finding with msg, or appends a new finding.
func addFinding(list []finding, msg, what string) []finding {
	for i := range list {
		if list[i].msg == msg {
			if !slices.Contains(list[i].subjects, what) {
				list[i].subjects = append(list[i].subjects, what)
			}
			return list
		}
	}
	return append(list, finding{msg: msg, subjects: []string{what}})
}

// shortList joins at most n items and says how many more there are.
func shortList(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

// exploreEnv is what the report tells to explore further.
type exploreEnv struct {
	kubectl, kubeconfig, endpoint, token, metricsAddr, logDir, ccmLog string
	// examples: the demo ran the example policies and plugins (config.examples); setup
	// describes what it ran otherwise.
	examples  bool
	setup     string
	policyDir string // --policies, absolute; "" for the example ConfigMap
}

// writeReport prints the report.
func writeReport(out io.Writer, st state, converged bool, took time.Duration, env exploreEnv, exitAfter bool) {
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	tw := func() *tabwriter.Writer { return tabwriter.NewWriter(out, 0, 0, 2, ' ', 0) }
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}

	p("")
	if converged {
		p("hcloud-policy-ccm demo: converged %.1fs after start", took.Seconds())
	} else {
		p("hcloud-policy-ccm demo: NOT CONVERGED %.1fs after start:", took.Seconds())
		for _, s := range st.pending {
			p("  - %s", s)
		}
		p("  see the CCM's log: %s", env.ccmLog)
	}
	if !env.examples {
		p("Ran with %s.", env.setup)
	}

	p("")
	if env.examples {
		p("Nodes (initialised by the CCM; labels %s* from the node-labels plugin)", pluginLabelPrefix)
	} else {
		p("Nodes (initialised by the CCM; LABELS: those outside kubernetes.io, k8s.io and hetzner.cloud, such as a node-labels plugin's)")
	}
	w := tw()
	if env.examples {
		fmt.Fprintln(w, "  NAME\tPROVIDER ID\tTYPE\tZONE\tPLUGIN LABELS\tADDRESSES")
	} else {
		fmt.Fprintln(w, "  NAME\tPROVIDER ID\tTYPE\tZONE\tLABELS\tADDRESSES")
	}
	for _, n := range st.nodes {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\n", n.name, dash(n.providerID), dash(n.instanceType), dash(n.zone),
			dash(strings.Join(n.pluginLabels, ",")), dash(strings.Join(n.addresses, ",")))
	}
	_ = w.Flush()
	if len(st.nodeWarnings) > 0 {
		p("  Warning events on the nodes:")
		for _, line := range st.nodeWarnings {
			p("    %s", line)
		}
	}

	if !env.examples {
		writeServices(out, st.services)
	} else {
		writeExampleServices(out, st.services)
	}
	writeCost(out, st.cost)
	writeRequests(out, st)
	writeExplore(out, env, exitAfter)
}

// writeExampleServices prints the Services as the example policies and plugins lead to them:
// the table, the denial of shop/web, the warnings.
func writeExampleServices(out io.Writer, services []serviceState) {
	st := state{services: services}
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	tw := func() *tabwriter.Writer { return tabwriter.NewWriter(out, 0, 0, 2, ' ', 0) }
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	p("")
	p("Services of type LoadBalancer (load balancer names from the lb-name plugin)")
	w := tw()
	fmt.Fprintln(w, "  SERVICE\tEXTERNAL IP\tLOAD BALANCER\tID\tWHAT")
	for _, s := range st.services {
		ip, id := "<pending>", "-"
		if len(s.ingress) > 0 {
			ip = strings.Join(s.ingress, ",")
		}
		if s.lbID != 0 {
			id = fmt.Sprint(s.lbID)
		}
		what := s.note
		if s.denied {
			what += ": denied by policy"
		}
		if len(s.ipTargets) > 0 {
			what += "; IP targets (dedicated servers) " + strings.Join(s.ipTargets, ",")
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", s.key(), ip, dash(s.lbName), id, what)
	}
	_ = w.Flush()
	for _, s := range st.services {
		if s.denial == "" {
			continue
		}
		p("")
		changed := "nothing was changed in the cloud"
		if strings.HasPrefix(s.denial, "applied: ") {
			changed = "the steps that do not need the denied ones were applied"
		}
		p("Denied by policy (%s event on %s; %s):", executor.ReasonPolicyDenied, s.key(), changed)
		for _, f := range splitPolicyEvent(s.denial) {
			p("  %s", f.msg)
			if len(f.subjects) > 0 {
				p("    for %s", shortList(f.subjects, 3))
			}
		}
	}
	var warnings []finding
	for _, s := range st.services {
		for _, w := range s.warnings {
			for _, f := range splitPolicyEvent(w) {
				warnings = addFinding(warnings, f.msg, s.key())
			}
		}
	}
	if len(warnings) > 0 {
		p("")
		p("Policy warnings (%s events, not blocking):", executor.ReasonPolicyWarning)
		for _, f := range warnings {
			p("  %s", f.msg)
			p("    on %s", strings.Join(f.subjects, ", "))
		}
	}
}

// writeServices prints, for any policies and plugins, each Service's outcome in a table and
// then its policy decisions (from the PolicyDenied, PolicyDryRunDenied and PolicyWarning
// events) and its plan (the operations of the LoadBalancerCreated/Updated events).
func writeServices(out io.Writer, services []serviceState) {
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	p("")
	p("Services of type LoadBalancer")
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  SERVICE\tEXTERNAL IP\tLOAD BALANCER\tID\tOUTCOME")
	for _, s := range services {
		ip, name, id := "<pending>", "-", "-"
		if len(s.ingress) > 0 {
			ip = strings.Join(s.ingress, ",")
		}
		if s.lbName != "" {
			name = s.lbName
		}
		if s.lbID != 0 {
			id = fmt.Sprint(s.lbID)
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", s.key(), ip, name, id, s.note+": "+s.verdict())
	}
	_ = w.Flush()
	for _, s := range services {
		e := s.events
		p("")
		p("%s (%s): %s", s.key(), s.note, s.verdict())
		switch {
		case len(e.denied) > 0 && len(s.ingress) == 0:
			p("  policy: denied (%s event; nothing was changed in the cloud):", executor.ReasonPolicyDenied)
		case len(e.denied) > 0:
			p("  policy: a later change was denied (%s event; the load balancer keeps what was applied):", executor.ReasonPolicyDenied)
		case len(e.dryRunDenied) > 0:
			p("  policy: denied in dry run (%s event; applied anyway):", executor.ReasonPolicyDryRunDenied)
		case len(e.applied) > 0:
			p("  policy: allowed")
		default:
			p("  policy: no decision reported yet")
		}
		var msgs []string
		if len(e.denied) > 0 {
			msgs = e.denied[len(e.denied)-1:]
		} else if len(e.dryRunDenied) > 0 {
			msgs = e.dryRunDenied
		}
		writeFindings(p, msgs, "    ")
		if len(e.warnings) > 0 {
			p("  warnings (%s events, not blocking):", executor.ReasonPolicyWarning)
			writeFindings(p, e.warnings, "    ")
		}
		if len(e.applied) > 0 {
			p("  plan applied (%s/%s events): %s", executor.ReasonLoadBalancerCreated, executor.ReasonLoadBalancerUpdated, shortList(e.applied, 8))
		} else {
			p("  plan applied: nothing")
		}
		if e.failure != "" && len(s.ingress) == 0 && len(e.denied) == 0 { // a denial's failure repeats it
			p("  last error (%s): %s", reasonSyncFailed, e.failure)
		}
		if len(s.ingress) > 0 {
			p("  address: %s", strings.Join(s.ingress, ", "))
		}
	}
}

// writeFindings prints the distinct messages of the policy events, each with its operations.
func writeFindings(p func(string, ...any), events []string, indent string) {
	var all []finding
	for _, ev := range events {
		for _, f := range splitGroupedEvent(ev) {
			for _, sub := range f.subjects {
				all = addFinding(all, f.msg, sub)
			}
			if len(f.subjects) == 0 {
				all = addFinding(all, f.msg, "")
			}
		}
	}
	for _, f := range all {
		subjects := slices.DeleteFunc(slices.Clone(f.subjects), func(s string) bool { return s == "" })
		if len(subjects) > 0 {
			p("%s%s (for %s)", indent, f.msg, shortList(subjects, 3))
		} else {
			p("%s%s", indent, f.msg)
		}
	}
}

// writeRequests prints the emulators' request counts.
func writeRequests(out io.Writer, st state) {
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	tw := func() *tabwriter.Writer { return tabwriter.NewWriter(out, 0, 0, 2, ' ', 0) }
	p("")
	p("Hetzner API (emulator): %d requests, %d mutating", st.requests, st.mutating)
	w := tw()
	for _, route := range slices.Sorted(maps.Keys(st.mutatingRoutes)) {
		fmt.Fprintf(w, "  %s\t%d\n", route, st.mutatingRoutes[route])
	}
	_ = w.Flush()
	if len(st.robotRequests) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(st.robotRequests)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, st.robotRequests[k]))
		}
		p("Robot webservice (emulator): %s (server list cached for ROBOT_CACHE_TIMEOUT)", strings.Join(parts, ", "))
	}
}

// writeExplore prints the commands to explore further.
func writeExplore(out io.Writer, env exploreEnv, exitAfter bool) {
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	emuBase := strings.TrimSuffix(env.endpoint, "/v1")
	p("")
	p("Explore:")
	p("  export KUBECONFIG=%s", env.kubeconfig)
	p("  alias kubectl=%s", env.kubectl)
	if env.examples {
		p("  kubectl get nodes -L node.kubernetes.io/instance-type,topology.kubernetes.io/zone,%spool", pluginLabelPrefix)
	} else {
		p("  kubectl get nodes --show-labels")
	}
	p("  kubectl get services -A")
	p("  kubectl get events -A --field-selector reason=%s", executor.ReasonPolicyDenied)
	if env.examples {
		p("  kubectl label namespace shop hcloud-ccm/public=true   # the policy now allows shop/web: it gets an IP within seconds")
		p("  kubectl -n kube-system edit configmap hcloud-ccm-policies   # the CCM reloads policies within a second")
	}
	if env.policyDir != "" {
		p("  $EDITOR %s/*.rego   # the CCM reloads the directory on change", env.policyDir)
	}
	p("  export HCLOUD_ENDPOINT=%s HCLOUD_TOKEN=%s", env.endpoint, env.token)
	p("  curl -s -H \"Authorization: Bearer $HCLOUD_TOKEN\" $HCLOUD_ENDPOINT/load_balancers")
	p("  curl -s -H \"Authorization: Bearer $HCLOUD_TOKEN\" %s/_emu/counts", emuBase)
	p("  curl -s http://%s/metrics | grep ^hcloud_ccm", env.metricsAddr)
	p("Logs: %s (removed on exit; kept if the demo failed, or with E2E_KEEP_LOGS=1)", env.logDir)
	if !exitAfter {
		p("")
		p("Press Ctrl-C to stop everything and remove the temporary files.")
	}
}

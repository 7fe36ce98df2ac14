package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// faithfulSeed makes the random plans of TestProperty_DecisionsSeeWhatRequestsDo reproducible;
// a failure names the iteration, and the same seed replays it.
const faithfulSeed = 20261125

// faithfulIterations is the number of random Services; each gives a create plan, an update plan
// and, for every third, a delete plan, so more than 1,000 plans are checked.
const faithfulIterations = 450

// TestProperty_DecisionsSeeWhatRequestsDo is the policy contract's property: over random plans
// (random desired state against a random actual one, seeded), every mutating request the
// executor sends to the API is seen by exactly one policy decision whose input shows the same
// effects, and every decision belongs to a request. When the API refuses a create with what
// rides along (resource_limit_exceeded, injected for some creates) and the executor sends it
// split, the effects of all requests still equal those of all decisions. Unless split, the
// requests sent are also exactly those the plan listed beforehand (lbplan.Plan.APIRequests,
// what `plan` shows), byte for byte up to the placeholders of the answers. The effects of the requests are parsed
// from the request bodies the emulator recorded (what went over the wire), the effects seen
// by the policy from the decision inputs alone; neither side uses the code that builds the
// other.
func TestProperty_DecisionsSeeWhatRequestsDo(t *testing.T) {
	f := newFaithfulEnv(t)
	r := rand.New(rand.NewPCG(faithfulSeed, 0))
	plans := 0
	for i := range faithfulIterations {
		svc := faithfulService(i)
		first := f.randomDesired(r, svc, true)
		plans += f.check(t, i, "create", svc, first, nil)
		lb := f.lbOf(t, svc)
		if lb == nil {
			t.Fatalf("iteration %d: no load balancer after the create", i)
		}
		second := f.randomDesired(r, svc, false)
		if i%3 == 0 {
			// A delete follows, and lbplan.ComputeDelete refuses a protected load balancer:
			// the update turns the protection off (change_protection when the create set it).
			second.DeleteProtection = new(false)
		}
		plans += f.check(t, i, "update", svc, second, lb)
		if i%3 == 0 {
			plans += f.checkDelete(t, i, svc, f.lbOf(t, svc))
		}
		if t.Failed() {
			t.Fatalf("iteration %d failed (seed %d)", i, faithfulSeed)
		}
	}
	if plans < 1000 {
		t.Fatalf("checked %d non-empty plans, want at least 1000", plans)
	}
	for _, k := range lbplan.Kinds() { // every kind, so a new kind fails here until the generator makes it
		if f.ops[k.Operation()] == 0 {
			t.Errorf("no random plan decided %s: widen the generator (randomDesired)", k.Operation())
		}
	}
	if f.splits == 0 || f.refused != f.splits {
		t.Errorf("%d creates refused for %d faults: the fallback is not covered", f.refused, f.splits)
	}
	t.Logf("checked %d plans (%d creates split by resource_limit_exceeded), %d requests; decisions per operation: %v", plans, f.splits, f.requests, f.ops)
}

type faithfulEnv struct {
	emu      *hcloudemu.Emulator
	client   *hcloud.Client
	decider  *decider
	exec     *executor.Executor
	netID    int64
	servers  []int64
	requests int
	desireds int
	splits   int
	refused  int
	// ops counts the decisions per operation, to prove the random plans reach every kind.
	ops map[string]int
	// before is the load balancer as the API held it before the plan run (nil before a create):
	// what an update_service does not send, the API keeps from it.
	before *hcloud.LoadBalancer
}

func newFaithfulEnv(t *testing.T) *faithfulEnv {
	t.Helper()
	emu, endpoint := hcloudemu.NewTestServer(t)
	clientOpts := []hcloud.ClientOption{
		hcloud.WithEndpoint(endpoint), hcloud.WithToken(emu.Token()),
		hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond)}),
		hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond), MaxRetries: 3}),
	}
	client := hcloud.NewClient(clientOpts...)
	netID, err := emu.AddNetwork(hcloudemu.NetworkSpec{Name: "k8s", IPRange: "10.0.0.0/8",
		Subnets: []hcloudemu.SubnetSpec{{Type: "cloud", IPRange: "10.0.0.0/16", NetworkZone: "eu-central"}}})
	if err != nil {
		t.Fatal(err)
	}
	f := &faithfulEnv{emu: emu, client: client, netID: netID, decider: &decider{decision: allow}, ops: map[string]int{}}
	for i := 1; i <= 4; i++ {
		id, err := emu.AddServer(hcloudemu.ServerSpec{Name: fmt.Sprintf("node-%d", i),
			Networks: []hcloudemu.ServerNetwork{{NetworkID: netID, IP: fmt.Sprintf("10.0.1.%d", i)}}})
		if err != nil {
			t.Fatal(err)
		}
		f.servers = append(f.servers, id)
	}
	cluster := input.Cluster{Name: "prop", ClusterCIDR: "10.244.0.0/16", Network: &input.Network{ID: netID, Name: "k8s", IPRange: "10.0.0.0/8"}}
	// events are not checked here
	f.exec = newExecutor(t, executor.Options{Conn: testConn(t, endpoint, emu.Token(), clientOpts...), Decider: f.decider, Cluster: cluster})
	return f
}

func faithfulService(i int) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", i), Namespace: "prop", UID: types.UID(fmt.Sprintf("uid-%06d", i))},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
	}
}

// lbOf reads the load balancer of svc from the API (nil when there is none).
func (f *faithfulEnv) lbOf(t *testing.T, svc *corev1.Service) *hcloud.LoadBalancer {
	t.Helper()
	lbs, err := f.client.LoadBalancer.AllWithOpts(context.Background(), hcloud.LoadBalancerListOpts{
		ListOpts: hcloud.ListOpts{LabelSelector: lbplan.LabelServiceUID + "=" + string(svc.UID)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(lbs) == 0 {
		return nil
	}
	return lbs[0]
}

// randomDesired is a random load balancer for svc. A create may ask for a managed certificate;
// an update never does (the caller would have to look the certificate up).
func (f *faithfulEnv) randomDesired(r *rand.Rand, svc *corev1.Service, create bool) lbplan.Desired {
	pick := func(n int) bool { return r.IntN(n) == 0 }
	f.desireds++
	d := lbplan.Desired{
		Name:   "lb-" + string(svc.UID),
		Labels: map[string]string{lbplan.LabelServiceUID: string(svc.UID)},
		Type:   []string{"lb11", "lb21"}[r.IntN(2)], TypeSet: pick(2),
	}
	if pick(4) {
		d.Name, d.Rename = d.Name+"-renamed", true
	}
	if pick(2) {
		d.Location = []string{"fsn1", "nbg1"}[r.IntN(2)]
	} else {
		d.NetworkZone = "eu-central"
	}
	if pick(3) {
		d.DeleteProtection = new(pick(2))
	}
	if pick(2) {
		a := []hcloud.LoadBalancerAlgorithmType{hcloud.LoadBalancerAlgorithmTypeRoundRobin, hcloud.LoadBalancerAlgorithmTypeLeastConnections}[r.IntN(2)]
		d.Algorithm = &a
	}
	switch r.IntN(4) {
	case 0: // no network
	case 1, 2:
		d.Network = &lbplan.Attachment{ID: f.netID, IPRange: "10.0.0.0/8"}
	case 3:
		// A fixed IP of its own: load balancers of earlier iterations keep theirs.
		n := 2 * f.desireds
		d.Network = &lbplan.Attachment{ID: f.netID, IPRange: "10.0.0.0/8", IP: net.ParseIP(fmt.Sprintf("10.0.%d.%d", 2+n/250, 1+n%250))}
	}
	// The API refuses a load balancer with neither a public interface nor a network, and
	// public targets without a public interface; an update always says what it wants, so that
	// an interface disabled by the create is enabled before the network goes away.
	switch {
	case d.Network != nil && pick(2):
		d.PublicInterface = new(pick(2))
	case !create || pick(3):
		d.PublicInterface = new(true)
	}
	public := d.PublicInterfaceOnCreate()
	if public && pick(4) {
		d.IPv4RDNS = new(fmt.Sprintf("lb%d.example.com", r.IntN(3)))
	}
	for _, port := range []int{22, 80, 443, 8080} {
		if !pick(2) {
			continue
		}
		s := lbplan.Listener{Protocol: hcloud.LoadBalancerServiceProtocolTCP, ListenPort: port, DestinationPort: 30000 + port + r.IntN(2),
			HealthCheck: lbplan.HealthCheck{Protocol: hcloud.LoadBalancerServiceProtocolTCP, Port: 30000 + port}}
		if pick(2) {
			s.Proxyprotocol = new(pick(2))
		}
		if pick(2) {
			s.HealthCheck.Interval = new(time.Duration(5+5*r.IntN(2)) * time.Second)
		}
		if pick(3) {
			s.HealthCheck.Timeout = new(time.Duration(2+r.IntN(2)) * time.Second)
		}
		if pick(3) {
			s.HealthCheck.Retries = new(1 + r.IntN(3))
		}
		if pick(4) { // an http check: its http object is sent, each field when set
			s.HealthCheck.Protocol = hcloud.LoadBalancerServiceProtocolHTTP
			if pick(2) {
				s.HealthCheck.Path = new([]string{"/", "/healthz"}[r.IntN(2)])
			}
			if pick(3) {
				s.HealthCheck.StatusCodes = []string{"2??"}
			}
		}
		if create && port == 443 && pick(3) {
			s.Protocol = hcloud.LoadBalancerServiceProtocolHTTPS
			s.HTTP.Certificates = []int64{lbplan.PendingCertificateID}
			d.ManagedCertificate = &lbplan.ManagedCertificate{ID: lbplan.PendingCertificateID, Name: "cert-" + string(svc.UID),
				Domains: []string{string(svc.UID) + ".example.com"}, Labels: map[string]string{lbplan.LabelServiceUID: string(svc.UID)}}
		}
		d.Services = append(d.Services, s)
	}
	for _, id := range f.servers {
		if pick(2) {
			d.Targets = append(d.Targets, lbplan.Target{ServerID: id, UsePrivateIP: d.Network != nil && (!public || !pick(3))})
		}
	}
	for _, ip := range []string{"203.0.113.5", "203.0.113.6"} {
		if public && pick(3) {
			d.IPTargets = append(d.IPTargets, lbplan.IPTarget{IP: ip})
		}
	}
	return d
}

// check plans d against lb (nil: create), runs the plan and compares the decisions with the
// requests; it returns 1 for a non-empty plan, 0 for an empty one.
func (f *faithfulEnv) check(t *testing.T, i int, kind string, svc *corev1.Service, d lbplan.Desired, lb *hcloud.LoadBalancer) int {
	t.Helper()
	p, err := lbplan.Compute(d, lbplan.NewActual(lb))
	if err != nil {
		t.Fatalf("iteration %d %s: plan: %v", i, kind, err)
	}
	split := false
	if kind == "create" && i%7 == 3 && len(p.Requests()) < len(p.Mutations) {
		// The API refuses the create with what rides along for capacity: the executor sends
		// the create alone and the rest one request each.
		f.emu.AddFault(hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers", Times: 1, Code: "resource_limit_exceeded"})
		split = true
		f.splits++
	}
	f.before = lb
	return f.run(t, fmt.Sprintf("iteration %d %s %v (split %t)", i, kind, p.Labels(), split), svc, p, split)
}

func isCreate(m lbplan.Mutation) bool {
	_, ok := m.(lbplan.Create)
	return ok
}

// certificatesList is the certificates of a listener in a request body.
var certificatesList = regexp.MustCompile(`"certificates":\[[^\]]*\]`)

// checkPlanned compares the requests the plan listed (lbplan.Plan.APIRequests, what `plan`
// shows) with those sent (wire: method, path, body), after putting the placeholders of what
// only the answers know into the sent ones: the new load balancer's ID and addresses (after)
// and the ID of a certificate the plan created.
func (f *faithfulEnv) checkPlanned(t *testing.T, name string, p lbplan.Plan, planned []lbplan.PlannedRequest, after *lbplan.Actual, wire []string) {
	t.Helper()
	if len(p.Mutations) > 0 && isCreate(p.Mutations[0]) && after != nil {
		for i, w := range wire {
			w = strings.ReplaceAll(w, fmt.Sprintf("/load_balancers/%d/", after.ID), fmt.Sprintf("/load_balancers/%d/", lbplan.PlaceholderID))
			if strings.Contains(w, "/actions/"+lbplan.OpChangeDNSPtr+" ") {
				// Only change_dns_ptr names the new load balancer's own address; an IP target
				// may be the same address (the emulator hands out the generator's IPs too).
				w = strings.ReplaceAll(w, `"ip":"`+after.IPv4+`"`, `"ip":"`+lbplan.PlaceholderIPv4+`"`)
				w = strings.ReplaceAll(w, `"ip":"`+after.IPv6+`"`, `"ip":"`+lbplan.PlaceholderIPv6+`"`)
			}
			wire[i] = w
		}
	}
	for _, m := range p.Mutations {
		c, ok := m.(lbplan.CreateManagedCertificate)
		if !ok {
			continue
		}
		cert, _, err := f.client.Certificate.GetByName(context.Background(), c.Certificate.Name)
		if err != nil || cert == nil {
			t.Fatalf("%s: the certificate %s: %v", name, c.Certificate.Name, err)
		}
		for i, w := range wire { // the listeners name the new certificate: PendingCertificateID when planned
			wire[i] = certificatesList.ReplaceAllStringFunc(w, func(list string) string {
				ids := strings.Split(strings.TrimSuffix(strings.TrimPrefix(list, `"certificates":[`), "]"), ",")
				for j, id := range ids {
					if id == fmt.Sprint(cert.ID) {
						ids[j] = fmt.Sprint(lbplan.PendingCertificateID)
					}
				}
				return `"certificates":[` + strings.Join(ids, ",") + "]"
			})
		}
	}
	want := make([]string, 0, len(planned))
	for _, r := range planned {
		b, err := r.Request.JSON()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want = append(want, r.Request.Method+" "+r.Request.Path+" "+string(b))
	}
	if !slices.Equal(wire, want) {
		t.Errorf("%s: the requests sent are not those the plan listed\nsent:\n  %s\nplanned:\n  %s", name, strings.Join(wire, "\n  "), strings.Join(want, "\n  "))
	}
}

func (f *faithfulEnv) checkDelete(t *testing.T, i int, svc *corev1.Service, lb *hcloud.LoadBalancer) int {
	t.Helper()
	p, err := lbplan.ComputeDelete(lbplan.NewActual(lb))
	if err != nil {
		t.Fatalf("iteration %d delete: plan: %v", i, err)
	}
	f.before = lb
	return f.run(t, fmt.Sprintf("iteration %d delete", i), svc, p, false)
}

// run runs p and compares: every request with a decision of equal effects, and the reverse.
// After a split create (split) the requests of the create are no longer one; then the effects
// of all requests, one by one, must equal those of all decisions.
func (f *faithfulEnv) run(t *testing.T, name string, svc *corev1.Service, p lbplan.Plan, split bool) int {
	t.Helper()
	f.emu.ResetRequests()
	f.decider.inputs = nil
	planned, err := p.APIRequests()
	if err != nil {
		t.Fatalf("%s: APIRequests: %v", name, err)
	}
	after, err := f.exec.Run(context.Background(), svc, p)
	if err != nil {
		t.Fatalf("%s: run: %v", name, err)
	}
	var sent, wire []string
	for _, req := range f.emu.Requests() {
		if req.Method == "GET" {
			continue
		}
		if req.Status >= 300 {
			if split && req.Route == "POST /v1/load_balancers" && req.Status == 403 {
				f.refused++
				continue // the refused create: no effect
			}
			t.Fatalf("%s: %s %s answered %d", name, req.Method, req.Path, req.Status)
		}
		sent = append(sent, requestEffects(t, req, f.before))
		wire = append(wire, req.Method+" "+strings.TrimPrefix(req.Path, "/v1")+" "+req.Body)
	}
	if !split {
		f.checkPlanned(t, name, p, planned, after, wire)
	}
	var seen []string
	for _, in := range f.decider.inputs {
		f.ops[in.Operation]++
		seen = append(seen, decisionEffects(in))
	}
	f.requests += len(sent)
	if split {
		sent, seen = atoms(sent), atoms(seen)
	}
	slices.Sort(sent)
	slices.Sort(seen)
	if !slices.Equal(sent, seen) {
		t.Errorf("%s: the decisions do not see what the requests do\nrequests sent (%d):\n  %s\ndecisions (%d):\n  %s",
			name, len(sent), strings.Join(sent, "\n  "), len(seen), strings.Join(seen, "\n  "))
	}
	if p.Empty() {
		return 0
	}
	return 1
}

// atoms are the single effects of requests or decisions, without their operations.
func atoms(joined []string) []string {
	var out []string
	for _, j := range joined {
		_, effects, _ := strings.Cut(j, ": ")
		out = append(out, strings.Split(effects, "; ")...)
	}
	return out
}

// Effects are strings; one request or decision is its operation followed by its effects,
// sorted, so that a request and the decision that saw it compare equal.

func listenerEffect(sign string, port int, protocol string, dest int) string {
	return fmt.Sprintf("listener%s %d %s->%d", sign, port, protocol, dest)
}

// serverTargetEffect: remove_target names only the server, so a removal has no private flag.
func serverTargetEffect(sign string, id int64, private bool) string {
	if sign == "-" {
		return fmt.Sprintf("target- server:%d", id)
	}
	return fmt.Sprintf("target%s server:%d private=%t", sign, id, private)
}

func ipTargetEffect(sign, ip string) string { return fmt.Sprintf("target%s ip:%s", sign, ip) }

func labelsString(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func joinEffects(op string, effects []string) string {
	slices.Sort(effects)
	return op + ": " + strings.Join(effects, "; ")
}

// requestEffects parses one recorded mutating request. It knows the API's wire format only.
func requestEffects(t *testing.T, req hcloudemu.Request, before *hcloud.LoadBalancer) string {
	t.Helper()
	decode := func(v any) {
		if err := json.Unmarshal([]byte(req.Body), v); err != nil {
			t.Fatalf("%s: body %q: %v", req.Route, req.Body, err)
		}
	}
	id := func() string { return strings.Split(strings.TrimPrefix(req.Path, "/v1/load_balancers/"), "/")[0] }
	switch req.Route {
	case "POST /v1/load_balancers":
		var b schema.LoadBalancerCreateRequest
		decode(&b)
		at := ""
		if b.Location != nil {
			at = *b.Location
		} else if b.NetworkZone != nil {
			at = *b.NetworkZone
		}
		algorithm := string(hcloud.LoadBalancerAlgorithmTypeRoundRobin)
		if b.Algorithm != nil {
			algorithm = b.Algorithm.Type
		}
		network := int64(0)
		if b.Network != nil {
			network = *b.Network
		}
		labels := map[string]string{}
		if b.Labels != nil {
			labels = *b.Labels
		}
		effects := []string{fmt.Sprintf("lb name=%s type=%s at=%s algorithm=%s public=%t network=%d labels=%s",
			b.Name, b.LoadBalancerType.Name, at, algorithm, b.PublicInterface == nil || *b.PublicInterface, network, labelsString(labels))}
		var hcs struct {
			Services []struct {
				HealthCheck wireHealthCheck `json:"health_check"`
			} `json:"services"`
		}
		decode(&hcs)
		for i, s := range b.Services {
			effects = append(effects, listenerEffect("+", *s.ListenPort, s.Protocol, *s.DestinationPort)+" "+hcs.Services[i].HealthCheck.effect(nil))
		}
		for _, tg := range b.Targets {
			if tg.Type == "ip" {
				effects = append(effects, ipTargetEffect("+", tg.IP.IP))
				continue
			}
			effects = append(effects, serverTargetEffect("+", tg.Server.ID, tg.UsePrivateIP != nil && *tg.UsePrivateIP))
		}
		return joinEffects("create", effects)
	case "DELETE /v1/load_balancers/{id}":
		return joinEffects("delete", []string{"lb id=" + id()})
	case "PUT /v1/load_balancers/{id}":
		var b schema.LoadBalancerUpdateRequest
		decode(&b)
		return joinEffects("update", []string{fmt.Sprintf("name=%s labels=%s", *b.Name, labelsString(*b.Labels))})
	case "POST /v1/certificates":
		var b schema.CertificateCreateRequest
		decode(&b)
		return joinEffects("create_managed_certificate", []string{fmt.Sprintf("certificate+ %s %s", b.Name, strings.Join(b.DomainNames, ","))})
	}
	op, ok := strings.CutPrefix(req.Route, "POST /v1/load_balancers/{id}/actions/")
	if !ok {
		t.Fatalf("unexpected mutating request %s %s", req.Method, req.Path)
	}
	var effect string
	switch op {
	case "change_type":
		var b schema.LoadBalancerActionChangeTypeRequest
		decode(&b)
		effect = "type=" + b.LoadBalancerType.Name
	case "change_algorithm":
		var b schema.LoadBalancerActionChangeAlgorithmRequest
		decode(&b)
		effect = "algorithm=" + b.Type
	case "change_dns_ptr":
		var b schema.LoadBalancerActionChangeDNSPtrRequest
		decode(&b)
		effect = "dns_ptr"
	case "attach_to_network":
		var b schema.LoadBalancerActionAttachToNetworkRequest
		decode(&b)
		ip := ""
		if b.IP != nil {
			ip = *b.IP
		}
		effect = fmt.Sprintf("network+ %d ip=%s", b.Network, ip)
	case "detach_from_network":
		var b schema.LoadBalancerActionDetachFromNetworkRequest
		decode(&b)
		effect = fmt.Sprintf("network- %d", b.Network)
	case "change_protection":
		var b schema.LoadBalancerActionChangeProtectionRequest
		decode(&b)
		effect = fmt.Sprintf("protected=%t", b.Delete != nil && *b.Delete)
	case "enable_public_interface":
		effect = "public=true"
	case "disable_public_interface":
		effect = "public=false"
	case "add_service":
		var b schema.LoadBalancerActionAddServiceRequest
		decode(&b)
		var hc struct {
			HealthCheck wireHealthCheck `json:"health_check"`
		}
		decode(&hc)
		effect = listenerEffect("+", *b.ListenPort, b.Protocol, *b.DestinationPort) + " " + hc.HealthCheck.effect(nil)
	case "update_service":
		var b schema.LoadBalancerActionUpdateServiceRequest
		decode(&b)
		var hc struct {
			HealthCheck wireHealthCheck `json:"health_check"`
		}
		decode(&hc)
		effect = listenerEffect("~", b.ListenPort, *b.Protocol, *b.DestinationPort) + " " + hc.HealthCheck.effect(apiListener(before, b.ListenPort))
	case "delete_service":
		var b schema.LoadBalancerDeleteServiceRequest
		decode(&b)
		effect = fmt.Sprintf("listener- %d", b.ListenPort)
	case "add_target", "remove_target":
		var b schema.LoadBalancerActionAddTargetRequest
		decode(&b)
		sign := map[string]string{"add_target": "+", "remove_target": "-"}[op]
		if b.Type == "ip" {
			effect = ipTargetEffect(sign, b.IP.IP)
		} else {
			effect = serverTargetEffect(sign, b.Server.ID, b.UsePrivateIP != nil && *b.UsePrivateIP)
		}
	default:
		t.Fatalf("unexpected action %s", req.Path)
	}
	return joinEffects(op, []string{effect})
}

// decisionEffects is what one decision's input shows: for a create, the new load balancer with
// every listener and target it has; for a change, what differs between current and
// load_balancer, or the listener, target or certificate the input names. It reads nothing but
// the input.
func decisionEffects(in input.Input) string {
	lb, cur := in.LoadBalancer, in.Current
	switch in.Operation {
	case lbplan.OpCreate:
		at := lb.Location
		if at == "" {
			at = lb.NetworkZone
		}
		network := int64(0)
		if lb.Network != nil {
			network = lb.Network.ID
		}
		effects := []string{fmt.Sprintf("lb name=%s type=%s at=%s algorithm=%s public=%t network=%d labels=%s",
			lb.Name, lb.Type, at, lb.Algorithm, lb.PublicInterface, network, labelsString(lb.Labels))}
		for _, s := range lb.Services {
			effects = append(effects, listenerEffect("+", s.ListenPort, s.Protocol, s.DestinationPort)+" "+healthCheckEffect(s.HealthCheck))
		}
		for _, tg := range lb.Targets {
			effects = append(effects, targetEffect("+", tg))
		}
		return joinEffects("create", effects)
	case lbplan.OpDelete:
		return joinEffects("delete", []string{fmt.Sprintf("lb id=%d", lb.ID)})
	case lbplan.OpUpdate:
		return joinEffects("update", []string{fmt.Sprintf("name=%s labels=%s", lb.Name, labelsString(lb.Labels))})
	case lbplan.OpChangeType:
		return joinEffects(in.Operation, []string{"type=" + lb.Type})
	case lbplan.OpChangeAlgorithm:
		return joinEffects(in.Operation, []string{"algorithm=" + lb.Algorithm})
	case lbplan.OpChangeDNSPtr:
		return joinEffects(in.Operation, []string{"dns_ptr"})
	case lbplan.OpAttachToNetwork:
		return joinEffects(in.Operation, []string{fmt.Sprintf("network+ %d ip=%s", lb.Network.ID, lb.Network.PrivateIP)})
	case lbplan.OpDetachFromNetwork:
		return joinEffects(in.Operation, []string{fmt.Sprintf("network- %d", cur.Network.ID)})
	case lbplan.OpChangeProtection:
		return joinEffects(in.Operation, []string{fmt.Sprintf("protected=%t", lb.Protected)})
	case lbplan.OpEnablePublicInterface, lbplan.OpDisablePublicInterface:
		return joinEffects(in.Operation, []string{fmt.Sprintf("public=%t", lb.PublicInterface)})
	case lbplan.OpAddTarget:
		return joinEffects(in.Operation, []string{targetEffect("+", *in.Target)})
	case lbplan.OpRemoveTarget:
		return joinEffects(in.Operation, []string{targetEffect("-", *in.Target)})
	case lbplan.OpAddService:
		return joinEffects(in.Operation, []string{listenerEffect("+", in.Listener.ListenPort, in.Listener.Protocol, in.Listener.DestinationPort) + " " + healthCheckEffect(in.Listener.HealthCheck)})
	case lbplan.OpUpdateService:
		return joinEffects(in.Operation, []string{listenerEffect("~", in.Listener.ListenPort, in.Listener.Protocol, in.Listener.DestinationPort) + " " + healthCheckEffect(in.Listener.HealthCheck)})
	case lbplan.OpDeleteService:
		return joinEffects(in.Operation, []string{fmt.Sprintf("listener- %d", in.Listener.ListenPort)})
	case lbplan.OpCreateManagedCertificate:
		return joinEffects(in.Operation, []string{fmt.Sprintf("certificate+ %s %s", in.Certificate.Name, strings.Join(in.Certificate.Domains, ","))})
	}
	return joinEffects(in.Operation, []string{"unknown operation"})
}

func targetEffect(sign string, tg input.LBTarget) string {
	if tg.Type == "ip" {
		return ipTargetEffect(sign, tg.IP)
	}
	return serverTargetEffect(sign, tg.ServerID, tg.UsePrivateIP)
}

// The health check of a listener, as one effect string: "hc tcp:30080 interval=5 timeout=- ...",
// "-" for a field that is not sent (a create or add_service leaves it to the API's default).

// wireHealthCheck is a listener's health_check in a request body; nil fields were not sent.
type wireHealthCheck struct {
	Protocol *string `json:"protocol"`
	Port     *int    `json:"port"`
	Interval *int    `json:"interval"`
	Timeout  *int    `json:"timeout"`
	Retries  *int    `json:"retries"`
	HTTP     *struct {
		Domain      *string   `json:"domain"`
		Path        *string   `json:"path"`
		StatusCodes *[]string `json:"status_codes"`
		TLS         *bool     `json:"tls"`
	} `json:"http"`
}

// effect is the health check after the request: on an update_service (kept: the listener as
// the API held it before), what the body does not send keeps the value kept has.
func (w wireHealthCheck) effect(kept *hcloud.LoadBalancerService) string {
	var khc hcloud.LoadBalancerServiceHealthCheck
	if kept != nil {
		khc = kept.HealthCheck
	}
	keep := func(sent *int, had int) *int {
		if sent != nil || kept == nil {
			return sent
		}
		return new(had)
	}
	interval, timeout, retries := keep(w.Interval, int(khc.Interval.Seconds())), keep(w.Timeout, int(khc.Timeout.Seconds())), keep(w.Retries, khc.Retries)
	http := "-"
	if h := w.HTTP; h != nil {
		var kh *hcloud.LoadBalancerServiceHealthCheckHTTP
		if kept != nil && khc.HTTP != nil {
			kh = khc.HTTP
		}
		path, codes, domain, tls := h.Path, h.StatusCodes, h.Domain, h.TLS
		if kh != nil {
			path, domain, tls = cmpOr(path, &kh.Path), cmpOr(domain, &kh.Domain), cmpOr(tls, &kh.TLS)
			if codes == nil {
				codes = &kh.StatusCodes
			}
		}
		var cs []string
		if codes != nil {
			cs = *codes
		}
		http = fmt.Sprintf("{domain=%s path=%s codes=%v tls=%s}", opt(domain), opt(path), cs, opt(tls))
	}
	return fmt.Sprintf("hc %s:%d interval=%s timeout=%s retries=%s http=%s", *w.Protocol, *w.Port, opt(interval), opt(timeout), opt(retries), http)
}

// healthCheckEffect is the health check a decision's input shows, in wireHealthCheck.effect's
// words.
func healthCheckEffect(hc input.LBHealthCheck) string {
	http := "-"
	if h := hc.HTTP; h != nil {
		http = fmt.Sprintf("{domain=%s path=%s codes=%v tls=%s}", opt(h.Domain), opt(h.Path), h.StatusCodes, opt(h.TLS))
	}
	return fmt.Sprintf("hc %s:%d interval=%s timeout=%s retries=%s http=%s", hc.Protocol, hc.Port, opt(hc.Interval), opt(hc.Timeout), opt(hc.Retries), http)
}

// apiListener is the listener on port of lb as the API held it; nil when none.
func apiListener(lb *hcloud.LoadBalancer, port int) *hcloud.LoadBalancerService {
	if lb == nil {
		return nil
	}
	for i := range lb.Services {
		if lb.Services[i].ListenPort == port {
			return &lb.Services[i]
		}
	}
	return nil
}

func opt[T any](p *T) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func cmpOr[T any](sent, kept *T) *T {
	if sent != nil {
		return sent
	}
	return kept
}

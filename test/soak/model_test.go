//go:build soak

package soak

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Names the soak's workload uses.
const (
	annotationGroup        = "service.hcloud-policy-ccm.io/load-balancer-group"
	annotationNodeSelector = "load-balancer.hetzner.cloud/node-selector"
	annotationAlgorithm    = "load-balancer.hetzner.cloud/algorithm-type"
	labelServiceUID        = "hcloud-ccm/service-uid"
	labelGroup             = "hcloud-policy-ccm.io/load-balancer-group"
	labelGroupNamespace    = "hcloud-policy-ccm.io/group-namespace"
	labelProtected         = "hcloud-ccm/protected"
	labelPublic            = "hcloud-ccm/public"
	labelPool              = "soak.hcloud-policy-ccm.io/pool"
)

// Namespaces of the workload: default is public by the example policies' data, pub and grp by
// their label, priv never; flip and evil have the label toggled by the workload.
var (
	namespaces       = []string{"pub", "priv", "grp", "flip", "evil"}
	serviceNamespace = []string{"default", "pub", "priv", "flip", "evil"}
	toggled          = []string{"flip", "evil"}
)

// groupHome is each group's home namespace, and its anchor: the first member, created before
// any other and never deleted, so the group always has a member at home and its home never
// has a reason to change. Group tmp has no anchor and members in its home only: it comes and
// goes (its last member leaves, by deletion or by its annotation, and its load balancer must
// go), and since no member of another namespace ever joins it, its home cannot change either.
var groupHome = map[string]struct{ ns, anchor string }{
	"shop": {"grp", "shop-anchor"},
	"pay":  {"default", "pay-anchor"},
	"tmp":  {"pub", ""},
}

// anchorPort is the port of each group's anchor; other home members take the other of 80 and
// 443, so that no two members of a home ask for one listen port.
var anchorPort = map[string]int32{"shop": 80, "pay": 443}

// svcModel is what the soak asked of one Service.
type svcModel struct {
	NS, Name  string
	UID       string
	Ports     []int32
	Selector  string // pool name or ""
	Algorithm string // "" or least_connections
	Group     string
	LB        bool // type LoadBalancer (else ClusterIP)
	Anchor    bool
	Seq       int // creation order: a group's oldest home member leads it (its node selector is in force)
}

// Key is namespace/name.
func (s *svcModel) Key() string { return s.NS + "/" + s.Name }

// nodeModel is one node the soak registered.
type nodeModel struct {
	Name     string
	ServerID int64
	Pool     string
}

// model is the soak's view of what it asked for; the checks compare the cloud with it.
type model struct {
	mu           sync.Mutex
	services     map[string]*svcModel
	public       map[string]bool // namespace → may expose (the label, or default)
	extraPort    bool            // the policy revision in force allows 8080 too
	nodes        []nodeModel
	nextSvc      int
	nextNode     int
	deletedUIDs  map[string]string // UID → key of Services the soak deleted
	typeChanged  map[string]bool   // UID of Services turned ClusterIP (their load balancer goes)
	everPublicNS map[string]bool
}

func newModel() *model {
	return &model{
		services:     map[string]*svcModel{},
		public:       map[string]bool{"default": true, "pub": true, "grp": true, "priv": false, "flip": false, "evil": true},
		deletedUIDs:  map[string]string{},
		typeChanged:  map[string]bool{},
		everPublicNS: map[string]bool{"default": true, "pub": true, "grp": true, "evil": true},
	}
}

// expectation is what one Service should have once the CCM has converged.
type expectation int

const (
	// expectNothing: no claim (a listener the policy refuses may or may not exist already, a
	// namespace that lost its label keeps a load balancer that can no longer change).
	expectNothing expectation = iota
	// expectOwn: its own load balancer with its listeners and targets, its address.
	expectOwn
	// expectGroup: a home member: the group's load balancer serves it, its address.
	expectGroup
	// expectNone: the policy refuses it whatever happened before: no load balancer of its own,
	// no address (a Service in priv, a member of a group outside the group's home).
	expectNone
)

// expect says what s should have; the caller holds m.mu.
func (m *model) expect(s *svcModel) expectation {
	if !s.LB {
		return expectNothing
	}
	if s.Group != "" {
		if groupHome[s.Group].ns == s.NS {
			return expectGroup
		}
		return expectNone
	}
	if !m.everPublicNS[s.NS] {
		return expectNone
	}
	if !m.public[s.NS] {
		return expectNothing
	}
	for _, p := range s.Ports {
		if p != 80 && p != 443 {
			return expectNothing
		}
	}
	return expectOwn
}

// pick returns a random Service that matches keep, or nil.
func (m *model) pick(r intn, keep func(*svcModel) bool) *svcModel {
	var keys []string
	for k, s := range m.services {
		if keep(s) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	sort.Strings(keys)
	return m.services[keys[r.IntN(len(keys))]]
}

// homePorts are the ports the group's home members use.
func (m *model) homePorts(group string) []int32 {
	var out []int32
	for _, s := range m.services {
		if s.Group == group && s.NS == groupHome[group].ns && s.LB {
			out = append(out, s.Ports...)
		}
	}
	return out
}

// leaderPool is the node pool of group g's oldest home member of type LoadBalancer, whose
// settings the group's load balancer follows ("" for all nodes).
func (m *model) leaderPool(g string) string {
	var leader *svcModel
	for _, s := range m.services {
		if s.Group == g && s.LB && s.NS == groupHome[g].ns && (leader == nil || s.Seq < leader.Seq) {
			leader = s
		}
	}
	if leader == nil {
		return ""
	}
	return leader.Selector
}

// nodesFor returns the server IDs of the nodes a Service with selector pool targets.
func (m *model) nodesFor(pool string) []int64 {
	var out []int64
	for _, n := range m.nodes {
		if pool == "" || n.Pool == pool {
			out = append(out, n.ServerID)
		}
	}
	slices.Sort(out)
	return out
}

// summary describes the model in one line, for the report.
func (m *model) summary() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var groups, own, none int
	for _, s := range m.services {
		switch m.expect(s) {
		case expectGroup:
			groups++
		case expectOwn:
			own++
		case expectNone:
			none++
		}
	}
	var pub []string
	for _, ns := range toggled {
		pub = append(pub, fmt.Sprintf("%s=%v", ns, m.public[ns]))
	}
	return fmt.Sprintf("%d Services (%d with their own load balancer, %d group home members, %d refused), %d nodes, public %s, 8080 allowed %v",
		len(m.services), own, groups, none, len(m.nodes), strings.Join(pub, " "), m.extraPort)
}

// intn is the random source the model picks with.
type intn interface{ IntN(int) int }

package loadbalancer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// DefaultDenialMaxAge is how long a remembered denial answers the retries of an unchanged
// Service (see denialCache) when Options.DenialMaxAge is 0.
const DefaultDenialMaxAge = time.Hour

// denialCache remembers the last denial of each Service together with a digest of every input
// it was decided on, so that the service controller's retries of a Service that nothing changed
// for cost no Hetzner request: a retry with the same digest returns the same error without
// reading the load balancer, the certificates or the types again.
//
// The digest covers what the CCM knows without asking Hetzner: the kind of call (ensure,
// update, delete), the cluster name, the Service (UID, name, labels, annotations and the whole
// spec: resourceVersion would change on every status write, generation misses annotation
// edits), the nodes passed in (name, provider ID, labels, addresses), the load balancer name
// (annotation or naming plugin) and whether it may rename, the policy revision in force and the labels of the Service's
// namespace. What it reads from Hetzner (the load balancer, certificates by name, the type list,
// Robot servers) counts "as last read": a change made behind the CCM's back is seen on the
// first retry after maxAge, or at once when any input above changes (a new policy revision or
// namespace labels also trigger a retry through ccm/requeue, which changes an annotation).
//
// Only denials by deny messages are remembered: a decision that failed (deadline, unreadable
// namespace) may pass on the next try. A denial whose other steps ran (steps fail alone) is
// remembered as the retry meets it: only its denied and skipped steps, nothing applied
// (executor.DeniedError.Remaining). A call that is not denied forgets the Service.
// TestDenialCache and TestAPIBudget (ccm) enforce the zero-request retry.
type denialCache struct {
	maxAge time.Duration
	now    func() time.Time

	mu      sync.Mutex
	entries map[types.UID]denialEntry
	// groupWrites counts, per load balancer group, the plans this CCM sent to the group's load
	// balancer: a member's sync changes what the others plan from, so it is in their digests
	// (groupDenialDigest).
	groupWrites map[string]uint64
}

type denialEntry struct {
	digest string
	err    error
	at     time.Time
}

func newDenialCache(maxAge time.Duration) *denialCache {
	return &denialCache{maxAge: maxAge, now: time.Now, entries: map[types.UID]denialEntry{}, groupWrites: map[string]uint64{}}
}

// wroteGroup records that a plan is sent to the load balancer of group.
func (c *denialCache) wroteGroup(group string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.groupWrites[group]++
}

// groupWriteCount is how many plans were sent to the load balancer of group (wroteGroup).
func (c *denialCache) groupWriteCount(group string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groupWrites[group]
}

// get returns the remembered denial of uid if it was decided on digest less than maxAge ago.
func (c *denialCache) get(uid types.UID, digest string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[uid]
	if !ok || e.digest != digest || c.now().Sub(e.at) >= c.maxAge {
		return nil
	}
	return e.err
}

// record remembers err for uid and digest when it is a denial by deny messages, and forgets
// uid otherwise. digest "" (an input that could not be digested) forgets too. Expired entries
// are dropped on the way, so the map holds at most the Services denied within maxAge.
func (c *denialCache) record(uid types.UID, digest string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for k, e := range c.entries {
		if now.Sub(e.at) >= c.maxAge {
			delete(c.entries, k)
		}
	}
	var denied *executor.DeniedError
	if digest == "" || !errors.As(err, &denied) || denied.Failed > 0 {
		delete(c.entries, uid)
		return
	}
	if len(denied.Applied) > 0 { // steps that failed alone: a retry finds the rest applied
		err = denied.Remaining()
	}
	c.entries[uid] = denialEntry{digest: digest, err: err, at: now}
}

// Kinds of call in a denial digest.
const (
	callEnsure = "ensure"
	callUpdate = "update"
	callDelete = "delete"
)

// denialDigest digests the inputs of one call for svc (see denialCache); "" when there is no
// policy revision to name (no policy: nothing is denied) or the namespace labels cannot be read
// (the decision fails, and a failure is not remembered).
func (l *LoadBalancers) denialDigest(call, clusterName, name string, rename bool, svc *corev1.Service, nodes []*corev1.Node) string {
	return l.digest(call, clusterName, name, rename, svc, nodes, nil)
}

// digest is denialDigest with group (nil for a Service of its own: see groupDenialDigest) in
// the digested inputs.
func (l *LoadBalancers) digest(call, clusterName, name string, rename bool, svc *corev1.Service, nodes []*corev1.Node, group any) string {
	rev, ok := l.exec.PolicyRevision()
	if !ok {
		return ""
	}
	nsLabels, err := l.exec.NamespaceLabels(svc.Namespace)
	if err != nil {
		return ""
	}
	type node struct {
		Name, ProviderID string
		Labels           map[string]string
		Addresses        []corev1.NodeAddress
	}
	ns := make([]node, 0, len(nodes))
	for _, n := range nodes {
		if n != nil {
			ns = append(ns, node{n.Name, n.Spec.ProviderID, n.Labels, n.Status.Addresses})
		}
	}
	slices.SortFunc(ns, func(a, b node) int { return strings.Compare(a.Name, b.Name) })
	b, err := json.Marshal(struct {
		Call, Cluster, Name, Revision string
		Rename                        bool
		UID                           types.UID
		Namespace, Service            string
		Labels, Annotations           map[string]string
		Spec                          corev1.ServiceSpec
		NamespaceLabels               map[string]string
		Nodes                         []node
		Group                         any `json:",omitempty"`
	}{call, clusterName, name, rev, rename, svc.UID, svc.Namespace, svc.Name, svc.Labels, svc.Annotations, svc.Spec, nsLabels, ns, group})
	if err != nil {
		klog.V(2).InfoS("cannot digest the inputs of a load balancer call; its denial is not remembered", "service", klog.KObj(svc), "err", err)
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// groupDenialDigest is denialDigest for svc, a member of group: besides svc's own inputs it
// covers every member of the group as the Service lister has it (namespace/name, UID, age,
// annotations and spec: the plan of a group is the whole group's) and the plans this CCM sent
// to the group's load balancer since (denialCache.wroteGroup: another member's sync changes what
// svc plans from). So an unchanged denied member is denied again without a request, while any
// change to the group decides again. "" (decide again) when the members cannot be listed.
func (l *LoadBalancers) groupDenialDigest(call, clusterName, group string, svc *corev1.Service, nodes []*corev1.Node) string {
	members, err := l.members(svc, group, true)
	if err != nil {
		return ""
	}
	type member struct {
		Key         string
		UID         types.UID
		Created     time.Time
		Annotations map[string]string
		Spec        corev1.ServiceSpec
	}
	ms := make([]member, 0, len(members))
	for _, m := range members {
		ms = append(ms, member{lbplan.Key(m), m.UID, m.CreationTimestamp.UTC(), m.Annotations, m.Spec})
	}
	return l.digest(call, clusterName, "", false, svc, nodes, struct {
		Name    string
		Writes  uint64
		Members []member
	}{group, l.denied.groupWriteCount(group), ms})
}

package loadbalancer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// DefaultDenialMaxAge is how long a remembered denial answers the retries of an unchanged
// Service (see denialCache) when Options.DenialMaxAge is 0.
const DefaultDenialMaxAge = time.Hour

// denialCache remembers the last denial of each Service, so that the service controller's
// retries of a Service that nothing changed for cost no Hetzner request, decision or event.
//
// "Nothing changed" is derived, never listed: the digest of a denial is the gate's digest of the
// inputs it decided (gate.DeniedError.Inputs: the policy revision and the JSON of every
// step's policy input), so every input field is in it, fields added later too. A retry knows
// its digest before any request: each call records the answers of the reads its planning makes
// (reads.go), and a retry plans again from the denied call's record (replayDigest). A denial is
// remembered only when that replay gives exactly the inputs the gate decided (remember), so a
// replay that drifts from the real path can cost requests, never answer a changed Service.
// The digest also covers the kind of call, the nodes as the planner receives them (a node
// change is read fresh once even when the plan ignores it) and, for a group member, the plans
// this CCM sent to the group's load balancer since the call (wroteGroup: another member's sync
// changes the state the record holds).
//
// The record is Hetzner's state as last read: a change made behind the CCM's back is seen on
// the first retry after maxAge, or at once with any other change (ccm/requeue retries on new
// revisions and namespace labels by changing an annotation). Only denials by deny messages are
// remembered: a failed decision may pass on the next try. A denial whose other steps ran is
// remembered as the retry meets it (gate.DeniedError.Remaining). Any other result forgets
// the Service. Tests: TestDenialCache, TestDenialCache_derivedFromInputs,
// TestRemember_onlyWhatTheReplayReproduces, TestAPIBudget_deniedRetries (ccm),
// TestGroup_DeniedMemberRetryCostsNothing and Testgate.Gate.Digest_coversEveryInputField (executor).
type denialCache struct {
	maxAge time.Duration
	now    func() time.Time

	mu      sync.Mutex
	entries map[types.UID]denialEntry
	// groupWrites counts, per load balancer group, the plans this CCM sent to the group's load
	// balancer: a member's sync changes what the others plan from, so the count when a call
	// starts is in its digest (replayDigest).
	groupWrites map[string]uint64
}

// denialEntry is a remembered denial: its digest (replayDigest), the reads of the call that was
// denied (reads.go), which a retry plans from, and the error.
type denialEntry struct {
	digest  string
	answers map[string]any
	err     error
	at      time.Time
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

// reads returns the reads of the call whose denial of uid is remembered, if one less than
// maxAge old is.
func (c *denialCache) reads(uid types.UID) (map[string]any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[uid]
	if !ok || c.now().Sub(e.at) >= c.maxAge {
		return nil, false
	}
	return e.answers, true
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

// record is keep without reads.
func (c *denialCache) record(uid types.UID, digest string, err error) {
	c.keep(uid, digest, nil, err)
}

// keep remembers err for uid, digest and the reads of its call (answers) when err is a denial
// by deny messages, and forgets uid otherwise. digest "" (a call whose inputs could not be
// digested) forgets too. Expired entries are dropped on the way, so the map holds at most the
// Services denied within maxAge.
func (c *denialCache) keep(uid types.UID, digest string, answers map[string]any, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for k, e := range c.entries {
		if now.Sub(e.at) >= c.maxAge {
			delete(c.entries, k)
		}
	}
	var denied *gate.DeniedError
	if digest == "" || !errors.As(err, &denied) || denied.Failed > 0 {
		delete(c.entries, uid)
		return
	}
	if len(denied.Applied) > 0 { // steps that failed alone: a retry finds the rest applied
		err = denied.Remaining()
	}
	c.entries[uid] = denialEntry{digest: digest, answers: answers, err: err, at: now}
}

// denialKind is the kind of call of a denial: a denial of one kind does not answer another.
type denialKind string

// Kinds of call of a denial.
const (
	callEnsure denialKind = "ensure"
	callUpdate denialKind = "update"
	callDelete denialKind = "delete"
)

// denialCall is one call of the cloudprovider.LoadBalancer methods as the denial cache sees it.
type denialCall struct {
	kind  denialKind
	group string // "" for a Service of its own
	// writes is the group's write count (wroteGroup) when the call started: a write during the
	// call is a change.
	writes uint64
	svc    *corev1.Service
	nodes  []*corev1.Node
	// plan plans the call without running it: the plan the call hands to the executor, nil
	// when it hands none. It reads through ctx (reads.go), warns through ctx (notes.go) and
	// never writes.
	plan func(ctx context.Context) (*lbplan.Plan, error)
}

// rememberedDenial returns the remembered denial of c.svc when c plans, from the reads of the
// denied call, to the digest it was denied on (see denialCache); nil when c must run. It sends
// no request, decides nothing and records no event.
func (l *LoadBalancers) rememberedDenial(ctx context.Context, c denialCall) error {
	answers, ok := l.denied.reads(c.svc.UID)
	if !ok {
		return nil
	}
	digest, _ := l.replayDigest(ctx, c, answers)
	if digest == "" {
		return nil
	}
	err := l.denied.get(c.svc.UID, digest)
	if err != nil {
		klog.V(2).InfoS("Denied again without a request: planned from the reads of the denied call, the policy inputs, the nodes and the policy revision are unchanged",
			"service", klog.KObj(c.svc), "err", err)
	}
	return err
}

// remember remembers the result err of c, whose reads reads recorded, under the digest of the
// inputs the gate decided when it is a denial (see denialCache), and forgets the Service
// otherwise.
func (l *LoadBalancers) remember(ctx context.Context, c denialCall, reads *readRecord, err error) {
	answers := reads.recorded()
	var digest string
	var denied *gate.DeniedError
	if errors.As(err, &denied) && denied.Failed == 0 && denied.Inputs != "" {
		var inputs string
		if digest, inputs = l.replayDigest(ctx, c, answers); inputs != denied.Inputs {
			digest = ""
			klog.V(2).InfoS("Denial not remembered: planning the call again from its reads does not give the inputs the gate decided",
				"service", klog.KObj(c.svc))
		}
	}
	l.denied.keep(c.svc.UID, digest, answers, err)
}

// replayDigest plans c again, silently (notes.go), with its reads answered from answers (the
// record of a denied call) and returns the digest a denial of c is remembered under, and the
// gate's Digest of the plan as the executor prices it (inputs). The digest covers the kind of call, its group with
// the group's write count, inputs, and the nodes as the planner receives them. Both are
// "" when the replay needs a read the call did not make, plans nothing, fails, or the plan has
// no digest.
func (l *LoadBalancers) replayDigest(ctx context.Context, c denialCall, answers map[string]any) (digest, inputs string) {
	rctx, replay := replayReads(silently(ctx), answers)
	plan, err := c.plan(rctx)
	if err != nil || plan == nil || replay.wasMissed() {
		return "", ""
	}
	if inputs = l.gate.Digest(l.priced(*plan), c.svc); inputs == "" {
		return "", ""
	}
	nodes, _, err := l.targetNodes(rctx, c.nodes)
	if err != nil || replay.wasMissed() {
		return "", ""
	}
	b, err := json.Marshal(struct {
		Call   denialKind
		Group  string
		Writes uint64
		Inputs string
		Nodes  []lbplan.Node
	}{c.kind, c.group, c.writes, inputs, nodes})
	if err != nil {
		return "", ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), inputs
}

package loadbalancer

import (
	"context"
	"errors"
	"maps"
	"sync"
)

// The Hetzner reads of one call are recorded, so that the denial cache (denials.go) can plan
// the call again without a request: every read that planning makes (the load balancer, names of
// certificates, the managed certificate, the type list, the Robot server list, the network, and
// a group's gate answers) goes through read with a key that names the read and its arguments.
// A call's context carries its record (recordReads); a replay's context carries the answers of
// a record (replayReads), and read answers from them without calling Hetzner. This is the one
// value this package puts in a context: it belongs to one call and travels down its planning.

// readsKey is the context key of a call's record or replay.
type readsKey struct{}

// readRecord is what the reads of one call answered, by key. Only successful reads are kept,
// and the first answer of a key: it is the one the call planned from.
type readRecord struct {
	mu      sync.Mutex
	answers map[string]any
}

// readReplay answers reads from the answers of a record; missed is set when a read asked for a
// key the record does not have (the replay planned something the call did not).
type readReplay struct {
	answers map[string]any
	// audit is set on the audit's replay (AuditPlansFrom): a read it misses may be answered from
	// what a cache of this package holds in memory, without a request (heldOnly).
	audit  bool
	mu     sync.Mutex
	missed bool
}

// errNotRecorded is what read returns during a replay for a read the call did not make.
var errNotRecorded = errors.New("read not recorded by the denied call: planned again with a request")

// recordReads returns ctx with a new record of its reads.
func recordReads(ctx context.Context) (context.Context, *readRecord) {
	r := &readRecord{answers: map[string]any{}}
	return context.WithValue(ctx, readsKey{}, r), r
}

// replayReads returns ctx whose reads are answered from the answers of a record.
func replayReads(ctx context.Context, answers map[string]any) (context.Context, *readReplay) {
	r := &readReplay{answers: answers}
	return context.WithValue(ctx, readsKey{}, r), r
}

// replayAuditReads is replayReads for the audit: heldOnly reports true on the context returned.
func replayAuditReads(ctx context.Context, answers map[string]any) context.Context {
	return context.WithValue(ctx, readsKey{}, &readReplay{answers: answers, audit: true})
}

// heldOnly reports whether ctx is the audit's replay (replayAuditReads): there a read the
// record misses is answered from what a cache holds in memory, never by a request.
func heldOnly(ctx context.Context) bool {
	r, ok := ctx.Value(readsKey{}).(*readReplay)
	return ok && r.audit
}

// recorded returns a copy of what the reads of r answered so far.
func (r *readRecord) recorded() map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.answers)
}

// wasMissed reports whether the replay asked for a read the record does not have.
func (r *readReplay) wasMissed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.missed
}

// read answers the read named key: by calling live and recording its answer when ctx carries a
// record (recordReads), from the recorded answer when it carries a replay (replayReads, which
// never calls live: errNotRecorded when the call did not make the read), else by calling live.
// The key "" names a read that cannot be replayed: it is not recorded, and a replay misses it.
func read[T any](ctx context.Context, key string, live func() (T, error)) (T, error) {
	switch r := ctx.Value(readsKey{}).(type) {
	case *readReplay:
		r.mu.Lock()
		defer r.mu.Unlock()
		v, ok := r.answers[key].(T)
		if !ok || key == "" {
			r.missed = true
			return v, errNotRecorded
		}
		return v, nil
	case *readRecord:
		v, err := live()
		if err != nil {
			return v, err
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, seen := r.answers[key]; !seen && key != "" {
			r.answers[key] = v
		}
		return v, nil
	}
	return live()
}

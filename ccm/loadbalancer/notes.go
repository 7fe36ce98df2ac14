package loadbalancer

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// A note is a Warning event that planning found. Planning returns its notes as data
// (planned.notes, collected through the context as the reads are: reads.go), and the one place
// that acts on a plan, reconcile, records them after planning (record). Preview, the audit, a
// denial's replay and another group member's listeners plan silently (silently) and drop them,
// so none of them needs a copy of LoadBalancers with another recorder.
type note struct {
	obj     runtime.Object
	reason  string
	message string
}

// notes collects the notes of one planning; safe for concurrent use.
type notes struct {
	mu   sync.Mutex
	list []note
}

type notesKey struct{}

// collectNotes returns ctx whose notes (warn) are kept in the notes returned instead of
// recorded.
func collectNotes(ctx context.Context) (context.Context, *notes) {
	n := &notes{}
	return context.WithValue(ctx, notesKey{}, n), n
}

// silently returns ctx whose notes are dropped: the context of a planning that only looks.
func silently(ctx context.Context) context.Context {
	ctx, _ = collectNotes(ctx)
	return ctx
}

// taken returns the notes collected so far.
func (n *notes) taken() []note {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.list
}

// warn records a Warning event on obj, or keeps it as a note when ctx collects them
// (collectNotes, silently).
func (l *LoadBalancers) warn(ctx context.Context, obj runtime.Object, reason, message string) {
	if n, ok := ctx.Value(notesKey{}).(*notes); ok {
		n.mu.Lock()
		n.list = append(n.list, note{obj: obj, reason: reason, message: message})
		n.mu.Unlock()
		return
	}
	l.recorder.Event(obj, corev1.EventTypeWarning, reason, message)
}

// warnf is warn with a format.
func (l *LoadBalancers) warnf(ctx context.Context, obj runtime.Object, reason, format string, args ...any) {
	l.warn(ctx, obj, reason, fmt.Sprintf(format, args...))
}

// record records ns as Warning events, in the order they were found.
func (l *LoadBalancers) record(ns []note) {
	for _, n := range ns {
		l.recorder.Event(n.obj, corev1.EventTypeWarning, n.reason, n.message)
	}
}

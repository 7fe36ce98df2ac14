//go:build soak

package soak

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// violation is one broken invariant; repeats of the same kind and key are counted, not listed.
type violation struct {
	Kind, Key string
	First     time.Time
	Count     int
	Detail    string
	Events    []string // the soak's last events that name the objects involved, then the last ones
}

// event is one thing the soak did, for the report and for the context of a violation.
type event struct {
	Time time.Time
	Text string
}

// report collects what the soak did and found. It is safe for concurrent use.
type report struct {
	mu          sync.Mutex
	ops, faults map[string]int
	checks      map[string]int
	violations  []*violation
	byKey       map[string]*violation
	converge    []time.Duration // from the faults cleared to convergence
	fromStart   []time.Duration // from the round's first change to convergence
	events      []event
	writesBy    map[string]int
	undecidedBy map[string]int
	decidedN    int
	rounds      int
	waited      int // convergence waits whose first check found something not yet converged
}

func newReport() *report {
	return &report{ops: map[string]int{}, faults: map[string]int{}, checks: map[string]int{},
		byKey: map[string]*violation{}, writesBy: map[string]int{}, undecidedBy: map[string]int{}}
}

func (r *report) count(check string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks[check]++
}

func (r *report) writes(replica string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writesBy[replica]++
}

func (r *report) undecided(op string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.undecidedBy[op]++
}

func (r *report) decided() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decidedN++
}

// maxEvents bounds the soak's event log.
const maxEvents = 400

// event records what the soak did.
func (s *soak) event(format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	s.t.Logf("%s %s", time.Now().Format("15:04:05"), text)
	s.rep.mu.Lock()
	defer s.rep.mu.Unlock()
	s.rep.events = append(s.rep.events, event{Time: time.Now(), Text: text})
	if len(s.rep.events) > maxEvents {
		s.rep.events = s.rep.events[len(s.rep.events)-maxEvents:]
	}
}

// violation records a broken invariant of kind about key (counted once per kind and key),
// with the soak's last events about objects (names of Services, load balancers, groups).
func (s *soak) violation(kind, key string, objects []string, format string, args ...any) {
	detail := fmt.Sprintf(format, args...)
	s.rep.mu.Lock()
	v, ok := s.rep.byKey[kind+"|"+key]
	if ok {
		v.Count++
	}
	s.rep.mu.Unlock()
	if ok {
		return
	}
	k8s := s.serviceEvents(objects)
	s.rep.mu.Lock()
	if v, ok := s.rep.byKey[kind+"|"+key]; ok { // recorded meanwhile by the other goroutine
		v.Count++
		s.rep.mu.Unlock()
		return
	}
	v = &violation{Kind: kind, Key: key, First: time.Now(), Count: 1, Detail: detail, Events: append(s.lastEventsLocked(objects), k8s...)}
	s.rep.byKey[kind+"|"+key] = v
	s.rep.violations = append(s.rep.violations, v)
	s.rep.mu.Unlock()
	s.t.Logf("VIOLATION %s (seed %d, %s after start): %s", kind, s.cfg.seed, time.Since(s.start).Round(time.Second), detail)
}

// lastEventsLocked returns the last 6 events that name one of objects and the last 4 events;
// s.rep.mu is held.
func (s *soak) lastEventsLocked(objects []string) []string {
	var named, recent []string
	for i := len(s.rep.events) - 1; i >= 0 && (len(named) < 6 || len(recent) < 4); i-- {
		e := s.rep.events[i]
		line := e.Time.Format("15:04:05") + " " + e.Text
		if len(recent) < 4 {
			recent = append(recent, line)
		}
		if len(named) < 6 && slices.ContainsFunc(objects, func(o string) bool { return o != "" && strings.Contains(e.Text, o) }) {
			named = append(named, line)
		}
	}
	slices.Reverse(named)
	slices.Reverse(recent)
	return append(named, recent...)
}

// serviceEvents returns the last Kubernetes events of the objects that are Services
// ("namespace/name").
func (s *soak) serviceEvents(objects []string) []string {
	var out []string
	for _, o := range objects {
		ns, name, ok := strings.Cut(strings.TrimSuffix(o, " (deleted)"), "/")
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		list, err := s.c.Client().CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
		cancel()
		if err != nil {
			continue
		}
		items := list.Items
		sort.Slice(items, func(i, j int) bool { return items[i].LastTimestamp.Before(&items[j].LastTimestamp) })
		for _, ev := range items[max(0, len(items)-4):] {
			out = append(out, fmt.Sprintf("k8s %s %s/%s %s ×%d: %s", ev.LastTimestamp.Format("15:04:05"), ns, name, ev.Reason, ev.Count, ev.Message))
		}
	}
	return out
}

// percentile returns the p-th percentile (0-100) of ds, 0 for none.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// markdown renders the report.
func (s *soak) markdown(quietPerHour float64, quiet time.Duration) string {
	r := s.rep
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Soak report\n\n")
	w("- seed `SOAK_SEED=%d`, `SOAK_DURATION=%s` (ran %s, %d rounds), started %s\n", s.cfg.seed, s.cfg.duration, time.Since(s.start).Round(time.Second), r.rounds, s.start.UTC().Format(time.RFC3339))
	w("- drift %s, sweep %s, audit %s; convergence bound %s; quiet period %s\n", s.cfg.intervals.drift, s.cfg.intervals.sweep, s.cfg.intervals.audit, s.cfg.bound, quiet)
	w("- final state: %s\n", s.model.summary())
	w("- violations: **%d** (kinds: %s)\n\n", len(r.violations), strings.Join(violationKinds(r.violations), ", "))
	w("## Operations and faults injected\n\n| operation | n |\n|---|---|\n")
	for _, k := range slices.Sorted(maps.Keys(r.ops)) {
		w("| %s | %d |\n", k, r.ops[k])
	}
	w("\n| fault | n |\n|---|---|\n")
	for _, k := range slices.Sorted(maps.Keys(r.faults)) {
		w("| %s | %d |\n", k, r.faults[k])
	}
	w("\n## Checks run\n\n| invariant | times checked |\n|---|---|\n")
	for _, k := range slices.Sorted(maps.Keys(r.checks)) {
		w("| %s | %d |\n", k, r.checks[k])
	}
	w("\nWrites judged against the Lease and the decision log: %v by replica; %d matched an allowing decision of the same process, %d had no decision of the same action, operation and load balancer name in the log (by operation: %v); %d decisions read.\n",
		r.writesBy, r.decidedN, sum(r.undecidedBy), r.undecidedBy, s.decisions.count())
	w("\n## Convergence\n\n%d waits converged (rounds and the final one); in %d of them the first check found something not converged yet. After the faults of a round were cleared (and stopped replicas started again): p50 %s, p90 %s, max %s. From a round's first change (its window of 2-20 s included): p50 %s, max %s.\n",
		len(r.converge), r.waited, roundTenth(percentile(r.converge, 50)), roundTenth(percentile(r.converge, 90)), roundTenth(percentile(r.converge, 100)),
		roundTenth(percentile(r.fromStart, 50)), roundTenth(percentile(r.fromStart, 100)))
	w("\n## Requests\n\nBy route (emulator counters, all clients):\n\n| route | n |\n|---|---|\n")
	counts := s.emu.Counts()
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		w("| `%s` | %d |\n", k, counts[k])
	}
	w("\nBy client (endpoint): ")
	for _, name := range []string{"a", "b", "w", "hand"} {
		reqs, _ := s.eps[name].since(0)
		w("%s %d; ", name, len(reqs))
	}
	w("\nOnce quiet (the last %s, no operation and no fault): %.0f requests per hour by the replicas.\n", quiet, quietPerHour)
	w("\n## Resources\n\n| replica | starts | peak RSS | CPU (all runs) |\n|---|---|---|---|\n")
	for _, name := range []string{"a", "b", "w"} {
		rep := s.replicas[name]
		rep.mu.Lock()
		w("| %s | %d | %.1f MiB | %s |\n", name, len(rep.lives), float64(rep.peak.RSSKiB)/1024, rep.cpuTotal().Round(100*time.Millisecond))
		rep.mu.Unlock()
	}
	w("\n## Violations\n\n")
	if len(r.violations) == 0 {
		w("None.\n")
	}
	for _, v := range r.violations {
		w("### %s: %s\n\nfirst at %s (%s after start, seed %d), seen %d times: %s\n\n", v.Kind, v.Key, v.First.UTC().Format(time.TimeOnly),
			v.First.Sub(s.start).Round(time.Second), s.cfg.seed, v.Count, v.Detail)
		if len(v.Events) > 0 {
			w("```text\n%s\n```\n\n", strings.Join(v.Events, "\n"))
		}
	}
	return b.String()
}

func roundTenth(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }

func violationKinds(vs []*violation) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range vs {
		if !seen[v.Kind] {
			seen[v.Kind] = true
			out = append(out, v.Kind)
		}
	}
	return out
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// writeReport writes the report to path and returns it.
func writeReport(path, text string) error {
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

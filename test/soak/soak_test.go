//go:build soak

// Package soak is the randomized fault soak (`make soak`, docs/reliability.md § The fault
// soak): the CCM binary, as deploy/ runs it with the example policies enforced and short drift,
// sweep and audit periods, in two replicas with leader election plus a webhook-only replica,
// against a real kube-apiserver and etcd (test/e2e/harness) and the Hetzner API emulator
// (internal/hcloudemu) in this process. A random mix of workload operations and faults, drawn
// from SOAK_SEED, runs in rounds for SOAK_DURATION; invariants are checked all the time and
// after every round; a report is printed and written to SOAK_REPORT.
package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// intervals are the CCM's background periods in the soak.
type intervals struct{ drift, sweep, audit time.Duration }

// config is the soak's settings, from the environment.
type config struct {
	seed        uint64
	duration    time.Duration // SOAK_DURATION: rounds run this long, then the quiet period
	quiet       time.Duration // SOAK_QUIET: no operation, no fault, after convergence
	bound       time.Duration // SOAK_CONVERGE_BOUND: how long a round may take to converge
	orphanGrace time.Duration
	report      string // SOAK_REPORT: where the report is written
	ccmBin      string // CCM_BIN
	intervals   intervals
}

// loadConfig reads the settings; SOAK_SEED defaults to the clock, so that each run differs
// and prints the seed that replays it.
func loadConfig(t *testing.T) config {
	cfg := config{
		seed: uint64(time.Now().UnixNano()), duration: 20 * time.Minute, quiet: 2 * time.Minute,
		bound: 2 * time.Minute, orphanGrace: 2 * time.Minute,
		report:    os.Getenv("SOAK_REPORT"),
		ccmBin:    os.Getenv("CCM_BIN"),
		intervals: intervals{drift: 20 * time.Second, sweep: 30 * time.Second, audit: 30 * time.Second},
	}
	if v := os.Getenv("SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SOAK_SEED=%q: %v", v, err)
		}
		cfg.seed = n
	}
	for env, d := range map[string]*time.Duration{"SOAK_DURATION": &cfg.duration, "SOAK_QUIET": &cfg.quiet, "SOAK_CONVERGE_BOUND": &cfg.bound} {
		if v := os.Getenv(env); v != "" {
			parsed, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("%s=%q: %v", env, v, err)
			}
			*d = parsed
		}
	}
	if cfg.ccmBin == "" {
		t.Fatalf("CCM_BIN is not set: run `make soak` (it builds bin/hcloud-policy-ccm and passes it)")
	}
	if cfg.report == "" {
		cfg.report = "soak-report.md"
	}
	return cfg
}

// soak is one run.
type soak struct {
	t     *testing.T
	cfg   config
	rnd   *rand.Rand
	start time.Time

	c         *harness.Cluster
	emu       *hcloudemu.Emulator
	eps       map[string]*endpoint
	replicas  map[string]*replica
	model     *model
	rep       *report
	decisions *decisionStore
	auditTail *tailer

	namesMu     sync.Mutex
	lbNames     map[int64]string
	orphanSince map[int64]time.Time
	writeCursor map[string]int
	watching    bool            // watch reads the replicas' logs (else waitLeader does)
	stuck       map[string]bool // mismatches a wait already reported as not converging
}

// TestSoak runs the soak; it fails when an invariant broke, and always writes the report.
func TestSoak(t *testing.T) {
	cfg := loadConfig(t)
	t.Logf("SOAK_SEED=%d SOAK_DURATION=%s (replay: make soak SOAK_SEED=%d SOAK_DURATION=%s)", cfg.seed, cfg.duration, cfg.seed, cfg.duration)
	s := &soak{t: t, cfg: cfg, rnd: rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x5eed)), model: newModel(), rep: newReport(),
		decisions: &decisionStore{}, lbNames: map[int64]string{}, orphanSince: map[int64]time.Time{}, writeCursor: map[string]int{}}
	s.setup()
	s.start = time.Now()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	s.watching = true
	go func() { defer wg.Done(); s.watch(ctx) }()

	deadline := s.start.Add(cfg.duration)
	for i := 1; time.Now().Before(deadline); i++ {
		s.round(ctx, i)
	}
	perHour, quiet := s.quietPeriod(ctx)
	cancel()
	wg.Wait()
	s.checkWrites()
	s.checkAudit()

	text := s.markdown(perHour, quiet)
	if err := writeReport(cfg.report, text); err != nil {
		t.Errorf("%v", err)
	}
	t.Logf("report written to %s\n%s", cfg.report, text)
	if n := len(s.rep.violations); n > 0 {
		t.Errorf("%d invariant violations (seed %d): see the report", n, cfg.seed)
	}
}

// setup starts the cluster, the emulator with two nodes, the replicas and the groups' anchors.
func (s *soak) setup() {
	t := s.t
	ctx := context.Background()
	c, auditLog := startCluster(t)
	s.c, s.auditTail = c, &tailer{path: auditLog}
	s.emu = hcloudemu.New(hcloudemu.WithRandSeed(s.cfg.seed), hcloudemu.WithRateLimit(0))
	s.eps = map[string]*endpoint{}
	for _, name := range []string{"a", "b", "w", "hand"} {
		s.eps[name] = newEndpoint(t, s.emu, name)
	}
	for _, ns := range namespaces {
		labels := map[string]string{}
		if s.model.public[ns] {
			labels[labelPublic] = "true"
		}
		if _, err := c.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
	}
	for range minNodes {
		if _, err := s.addNode(); err != nil {
			t.Fatalf("%v", err)
		}
	}
	s.startReplicas(ctx)
	for _, g := range []string{"shop", "pay"} {
		home := groupHome[g]
		m := &svcModel{NS: home.ns, Name: home.anchor, Ports: []int32{anchorPort[g]}, Group: g, LB: true, Anchor: true}
		if err := s.create(m); err != nil {
			t.Fatalf("%v", err)
		}
		s.event("created anchor %s of group %s (home %s)", m.Key(), g, home.ns)
	}
	harness.WaitFor(t, 3*time.Minute, func() (bool, error) {
		bad, err := s.convergence(ctx)
		if err != nil {
			return false, err
		}
		return len(bad) == 0, fmt.Errorf("initial state not converged: %v", bad)
	})
}

// startReplicas starts replica a, waits until it leads, then the standby b and the webhook
// replica w (which must start while the Lease is held: see webhookFlags).
func (s *soak) startReplicas(ctx context.Context) {
	t := s.t
	args, err := deploymentArgs(ctx, s.c)
	if err != nil {
		t.Fatalf("%v", err)
	}
	ccmConfig := s.c.ServiceAccountKubeconfig(t, ccmNamespace, ccmServiceAccount)
	webhookConfig := s.c.ServiceAccountKubeconfig(t, ccmNamespace, webhookServiceAccount)
	env := []string{"HCLOUD_TOKEN=" + s.emu.Token(), "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK=true",
		"HCLOUD_LOAD_BALANCERS_LOCATION=fsn1", "HCLOUD_LOAD_BALANCERS_TYPE=lb11"}
	kube := func(path string) []string {
		return []string{"--kubeconfig=" + path, "--authentication-kubeconfig=" + path, "--authorization-kubeconfig=" + path}
	}
	base := append(append(args, ccmFlags(s.cfg.intervals)...), kube(ccmConfig)...)
	s.replicas = map[string]*replica{}
	for _, name := range []string{"a", "b"} {
		s.replicas[name] = &replica{Name: name, args: base, env: env, bin: s.cfg.ccmBin, ep: s.eps[name]}
	}
	sc := harness.NewServingCert(t, "webhook")
	wargs := append(append(append(append([]string(nil), args...), ccmFlags(s.cfg.intervals)...), kube(webhookConfig)...), webhookFlags(harness.FreePort(t), sc)...)
	s.replicas["w"] = &replica{Name: "w", args: wargs, env: env, bin: s.cfg.ccmBin, ep: s.eps["w"], webhook: true}

	s.replicas["a"].start(t)
	if !s.waitLeader(2 * time.Minute) {
		t.Fatalf("replica a did not take the Lease within 2 minutes; last lines:\n%s", s.replicas["a"].current().proc.Tail(30))
	}
	s.replicas["b"].start(t)
	s.replicas["w"].start(t)
	s.event("replicas a (leader), b (standby) and w (webhook only) started")
}

// waitLeader waits until replica a or b leads, scanning their logs; false after timeout.
func (s *soak) waitLeader(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, name := range []string{"a", "b"} {
			if !s.replicas[name].started() {
				continue
			}
			if !s.watching {
				s.replicas[name].scan()
			}
			if s.replicas[name].leads() {
				return true
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

// watch runs the continuous checks until ctx ends: replica logs (Lease, panics) and crashes
// every half second; resources, ownership, writes and the audit log every 2 s.
func (s *soak) watch(ctx context.Context) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.scanReplicas()
		if n%4 != 0 {
			continue
		}
		for _, r := range s.replicas {
			r.sample()
		}
		if err := s.checkCloud(ctx); err != nil && ctx.Err() == nil {
			s.t.Logf("check: %v", err)
		}
		s.checkWrites()
		s.checkAudit()
	}
}

// scanReplicas reads the replicas' logs and reports a process that exited on its own (a crash)
// or logged a panic.
func (s *soak) scanReplicas() {
	for _, name := range []string{"a", "b", "w"} {
		r := s.replicas[name]
		for _, line := range r.scan() {
			s.violation("panic", r.Name+" "+line, nil, "replica %s logged %q", r.Name, line)
		}
		l := r.current()
		exited, err := l.proc.Exited()
		r.mu.Lock()
		crashed := exited && !l.stopping && !l.crashed
		if crashed {
			l.crashed = true
		}
		r.mu.Unlock()
		switch {
		case !crashed:
		case strings.Contains(l.proc.Tail(40), "leaderelection lost"):
			// By design: a replica that cannot renew its Lease in time exits, and its
			// Deployment starts it again (restartStopped does, at the end of the round).
			s.event("replica %s (%s) lost the Lease and exited (by design)", r.Name, l.proc.Name)
		default:
			s.violation("crash", r.Name, nil, "replica %s (%s) exited on its own: %v; last lines:\n%s", r.Name, l.proc.Name, err, l.proc.Tail(15))
		}
	}
}

// round runs one round: 1-3 operations and, six times in ten, 1-2 faults, for a window of 2-20
// s (with one more operation half-way, half the time); then the faults are cleared, stopped
// replicas are started again, and the round waits for convergence.
func (s *soak) round(ctx context.Context, i int) {
	s.rep.mu.Lock()
	s.rep.rounds = i
	s.rep.mu.Unlock()
	var ops []op
	for range 1 + s.rnd.IntN(3) {
		ops = append(ops, pickOp(s.rnd))
	}
	var fs []fault
	if s.rnd.IntN(10) < 6 {
		for range 1 + s.rnd.IntN(2) {
			fs = append(fs, pickFault(s.rnd))
		}
	}
	window := 2*time.Second + time.Duration(s.rnd.IntN(19))*time.Second
	midOp := s.rnd.IntN(2) == 0
	var mid op
	if midOp {
		mid = pickOp(s.rnd)
	}
	s.event("round %d: %d operations, faults %v, window %s", i, len(ops), faultNames(fs), window)

	began := time.Now()
	s.inject(fs, func(f fault) bool { return strings.Contains(f.name, "by-hand") })
	for _, o := range ops {
		s.apply(o)
	}
	s.inject(fs, func(f fault) bool { return !strings.Contains(f.name, "by-hand") })
	if midOp {
		time.Sleep(window / 2)
		s.apply(mid)
	}
	time.Sleep(time.Until(began.Add(window)))
	s.emu.ClearFaults()
	s.restartStopped()
	if _, ok := s.waitConverged(ctx, fmt.Sprintf("round %d", i)); ok {
		s.rep.mu.Lock()
		s.rep.fromStart = append(s.rep.fromStart, time.Since(began))
		s.rep.mu.Unlock()
	}
}

// apply runs one workload operation with the model locked.
func (s *soak) apply(o op) {
	s.model.mu.Lock()
	what, err := o.run(s)
	s.model.mu.Unlock()
	switch {
	case err != nil:
		s.event("%s failed: %v", o.name, err)
	case what != "":
		s.rep.mu.Lock()
		s.rep.ops[o.name]++
		s.rep.mu.Unlock()
		s.event("op %s: %s", o.name, what)
	}
}

// inject runs the faults that match keep.
func (s *soak) inject(fs []fault, keep func(fault) bool) {
	for _, f := range fs {
		if !keep(f) {
			continue
		}
		what, err := f.run(s)
		switch {
		case err != nil:
			s.event("fault %s failed: %v", f.name, err)
		case what != "":
			s.rep.mu.Lock()
			s.rep.faults[f.name]++
			s.rep.mu.Unlock()
			s.event("fault %s: %s", f.name, what)
		}
	}
}

// restartStopped starts again every replica whose process is gone: a and b first, then, once
// one of them leads, w (which must not start while the Lease is free).
func (s *soak) restartStopped() {
	for _, name := range []string{"a", "b"} {
		if !s.replicas[name].alive() {
			s.replicas[name].start(s.t)
			s.event("replica %s started again", name)
		}
	}
	if !s.replicas["w"].alive() {
		if !s.waitLeader(time.Minute) {
			s.event("no leader within a minute; webhook replica not restarted yet")
			return
		}
		s.replicas["w"].start(s.t)
		s.event("replica w started again")
	}
}

// waitConverged waits up to the bound for convergence after a round's faults were cleared and
// records the time it took (and returns it, with true), or a violation with what is still
// wrong.
func (s *soak) waitConverged(ctx context.Context, what string) (time.Duration, bool) {
	from := time.Now()
	var bad []string
	for first := true; time.Since(from) < s.cfg.bound; first = false {
		var err error
		bad, err = s.convergence(ctx)
		bad = s.newlyBad(bad)
		if first && len(bad) > 0 {
			s.rep.mu.Lock()
			s.rep.waited++
			s.rep.mu.Unlock()
		}
		if err == nil && len(bad) == 0 {
			d := time.Since(from)
			s.rep.mu.Lock()
			s.rep.converge = append(s.rep.converge, d)
			s.rep.mu.Unlock()
			s.event("%s converged in %s", what, d.Round(100*time.Millisecond))
			return d, true
		}
		time.Sleep(500 * time.Millisecond)
	}
	s.stuck = map[string]bool{}
	for _, b := range bad {
		s.stuck[b] = true
	}
	var who, objects []string
	for _, b := range bad {
		w, _, _ := strings.Cut(b, ":")
		who = append(who, w)
		objects = append(objects, strings.TrimPrefix(strings.TrimPrefix(w, "group "), "member "))
	}
	s.violation("not-converged", strings.Join(who, ", "), objects,
		"%s: not converged %s after the faults were cleared: %s", what, s.cfg.bound, strings.Join(bad, "; "))
	return 0, false
}

// newlyBad drops from bad what a wait before already reported as not converging (it stays
// reported, counted once): a breakage that lasts does not cost every later round the whole
// bound. What converged meanwhile leaves the stuck set, so that it is judged again if it
// breaks again.
func (s *soak) newlyBad(bad []string) []string {
	var out []string
	still := map[string]bool{}
	for _, b := range bad {
		if s.stuck[b] {
			still[b] = true
		} else {
			out = append(out, b)
		}
	}
	s.stuck = still
	return out
}

// quietPeriod waits for convergence, then lets the CCM run for the quiet period without any
// operation or fault, and returns the replicas' requests per hour in it.
func (s *soak) quietPeriod(ctx context.Context) (float64, time.Duration) {
	s.event("quiet period of %s", s.cfg.quiet)
	s.stuck = nil // the final wait judges everything, what a round reported as stuck too
	s.waitConverged(ctx, "final")
	from := time.Now()
	count := func() int {
		n := 0
		for _, name := range []string{"a", "b"} {
			reqs, _ := s.eps[name].since(0)
			for _, r := range reqs {
				if !r.Time.Before(from) {
					n++
				}
			}
		}
		return n
	}
	time.Sleep(s.cfg.quiet)
	n := count()
	s.stuck = nil // the final check judges everything
	bad, err := s.convergence(ctx)
	if err == nil && len(bad) > 0 {
		s.violation("diverged-while-quiet", strings.Join(bad, "; "), nil, "after the quiet period: %s", strings.Join(bad, "; "))
	}
	s.checkDeniedCost(s.deniedCostFrom(from))
	return float64(n) / time.Since(from).Hours(), time.Since(from).Round(time.Second)
}

// firstRound is how long a replica that took the Lease may spend on the first round of the
// denied Services (each decided once, then served from its denial cache).
const firstRound = time.Minute

// deniedCostFrom is when the denied Services' quiet window starts: at from, or a first round
// after the leader took the Lease, whichever is later.
func (s *soak) deniedCostFrom(from time.Time) time.Time {
	for _, name := range []string{"a", "b"} {
		r := s.replicas[name]
		l := r.current()
		r.mu.Lock()
		since := l.leadSince
		r.mu.Unlock()
		if r.alive() && !since.IsZero() && since.Add(firstRound).After(from) {
			from = since.Add(firstRound)
		}
	}
	return from
}

// pickOp draws an operation by weight.
func pickOp(r *rand.Rand) op {
	total := 0
	for _, o := range workload {
		total += o.weight
	}
	n := r.IntN(total)
	for _, o := range workload {
		if n < o.weight {
			return o
		}
		n -= o.weight
	}
	return workload[0]
}

// pickFault draws a fault by weight.
func pickFault(r *rand.Rand) fault {
	total := 0
	for _, f := range faults {
		total += f.weight
	}
	n := r.IntN(total)
	for _, f := range faults {
		if n < f.weight {
			return f
		}
		n -= f.weight
	}
	return faults[0]
}

func faultNames(fs []fault) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.name)
	}
	return out
}

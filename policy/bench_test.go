package policy_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

func benchEngine(b *testing.B) (*policy.Engine, input.Input) {
	b.Helper()
	e := policy.NewEngine(policy.Options{})
	if err := policy.WatchDir(b.Context(), e, examplesDir); err != nil {
		b.Fatal(err)
	}
	in, err := policy.ReadInputFile(filepath.Join(examplesDir, "inputs", "lb_create_default.json"))
	if err != nil {
		b.Fatal(err)
	}
	return e, in
}

// BenchmarkDecide decides the default load balancer creation with the example policies
// (every rule runs, none denies).
func BenchmarkDecide(b *testing.B) {
	e, in := benchEngine(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if d := e.Decide(ctx, in); !d.Allowed {
			b.Fatalf("Decide = %+v, want allowed", d)
		}
	}
}

// BenchmarkDecideLatency reports the p50 and p99 of 10,000 decisions per iteration.
func BenchmarkDecideLatency(b *testing.B) {
	e, in := benchEngine(b)
	ctx := context.Background()
	const n = 10000
	lat := make([]time.Duration, n)
	var p50, p99 time.Duration
	for b.Loop() {
		for i := range lat {
			start := time.Now()
			e.Decide(ctx, in)
			lat[i] = time.Since(start)
		}
		slices.Sort(lat)
		p50, p99 = lat[n/2], lat[n*99/100]
	}
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkLoad compiles the example policies (a reload's cost) without the no-op shortcut.
func BenchmarkLoad(b *testing.B) {
	files, err := policy.ReadDir(examplesDir)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := policy.NewEngine(policy.Options{}).Load(ctx, files, policy.Source{}); err != nil {
			b.Fatal(err)
		}
	}
}

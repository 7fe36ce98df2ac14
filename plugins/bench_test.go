package plugins_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
	"github.com/tetratelabs/wazero"
)

// BenchmarkCompile compiles the Go node-labels example without a compilation cache: the cost
// of the first Load of a plugin revision.
func BenchmarkCompile(b *testing.B) {
	wasm, err := os.ReadFile(goExample(b, "node-labels"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		rt := wazero.NewRuntime(ctx)
		if _, err := rt.CompileModule(ctx, wasm); err != nil {
			b.Fatal(err)
		}
		_ = rt.Close(ctx)
	}
}

// BenchmarkLoad loads the Go node-labels example while another copy is loaded, so the shared
// compilation cache serves it: the cost of reloading an unchanged file or a second plugin
// with the same bytes (checks, WASI and the first instance).
func BenchmarkLoad(b *testing.B) {
	path := goExample(b, "node-labels")
	loadExample(b, "node-labels", plugins.Options{}) // keeps the compiled module in the cache
	ctx := context.Background()
	for b.Loop() {
		p, err := plugins.Load(ctx, path, plugins.Options{})
		if err != nil {
			b.Fatal(err)
		}
		_ = p.Close(ctx)
	}
}

// BenchmarkInstantiate measures one instance of the Go example: time and host allocations
// per instance, and its guest memory after _initialize (guest-bytes).
func BenchmarkInstantiate(b *testing.B) {
	p := loadExample(b, "node-labels", plugins.Options{})
	ctx := context.Background()
	var mem uint32
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if mem, err = plugins.Instantiate(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(mem), "guest-bytes")
}

// BenchmarkCall measures warm calls with a deadline on, and reports percentiles and the maximum
// latency of single calls. The deadline is 1 s rather than the default 100 ms so a stall of a
// loaded machine does not abort the run; its cost per call does not depend on its length.
func BenchmarkCall(b *testing.B) {
	ctx := context.Background()
	cases := []struct {
		name string
		p    func(b *testing.B) *plugins.Plugin
		call func(p *plugins.Plugin) error
	}{
		{
			name: "go/node_labels",
			p: func(b *testing.B) *plugins.Plugin {
				return loadExample(b, "node-labels", plugins.Options{PoolSize: 1, CallTimeout: time.Second})
			},
			call: func(p *plugins.Plugin) error { _, err := p.NodeLabels(ctx, nodeIn); return err },
		},
		{
			name: "go/load_balancer_name",
			p: func(b *testing.B) *plugins.Plugin {
				return loadExample(b, "lb-name", plugins.Options{PoolSize: 1, CallTimeout: time.Second})
			},
			call: func(p *plugins.Plugin) error { _, err := p.LoadBalancerName(ctx, lbIn); return err },
		},
		{
			name: "wat/node_labels",
			p: func(b *testing.B) *plugins.Plugin {
				return load(b, "good", plugins.Options{PoolSize: 1, CallTimeout: time.Second})
			},
			call: func(p *plugins.Plugin) error { _, err := p.NodeLabels(ctx, nodeIn); return err },
		},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			p := c.p(b)
			for range 100 { // warm up
				if err := c.call(p); err != nil {
					b.Fatal(err)
				}
			}
			var d []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				if err := c.call(p); err != nil {
					b.Fatal(err)
				}
				d = append(d, time.Since(start))
			}
			slices.Sort(d)
			b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(d[len(d)*999/1000].Microseconds()), "p99.9-µs")
			b.ReportMetric(float64(d[len(d)-1].Microseconds()), "max-µs")
		})
	}
}

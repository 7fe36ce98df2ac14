package plugins

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Instantiate creates one more instance outside the pool and returns its guest memory size;
// benchmarks use it to measure the cost of an instance.
func Instantiate(ctx context.Context, p *Plugin) (memBytes uint32, err error) {
	inst, err := p.newInstance(ctx)
	if err != nil {
		return 0, err
	}
	defer inst.mod.Close(ctx)
	return inst.mod.Memory().Size(), nil
}

// OutputDroppedBytes reads hcloud_ccm_plugin_output_dropped_bytes_total for plugin.
func OutputDroppedBytes(plugin string) float64 {
	return testutil.ToFloat64(outputDropped.WithLabelValues(plugin))
}

// Failures reads hcloud_ccm_plugin_failures_total for hook.
func Failures(hook string) float64 {
	return testutil.ToFloat64(failures.WithLabelValues(hook))
}

// Calls reads how many calls of hook hcloud_ccm_plugin_call_duration_seconds has timed.
func Calls(hook string) uint64 {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(callDuration)
	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "hook" && l.GetValue() == hook {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

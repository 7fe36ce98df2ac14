package plugins

import (
	"context"

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

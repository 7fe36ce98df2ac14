package plugins

import "context"

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

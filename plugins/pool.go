package plugins

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// instance is one module instance; it serves one call at a time.
type instance struct {
	mod         api.Module
	alloc, free api.Function
	hooks       map[string]api.Function
	calls       int
	recycleAt   uint64 // memory size in bytes past which the instance is replaced
}

// newInstance instantiates the module, runs _initialize and checks ccm_abi_version, under a
// time limit of its own (10 × CallTimeout, at least 1 s) so a slow start does not eat a
// call's deadline and a looping _initialize cannot hang.
func (p *Plugin) newInstance(ctx context.Context) (*instance, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(10*p.opts.CallTimeout, minInstantiateTimeout))
	defer cancel()
	out := newLimitedWriter(p.opts.Stderr, p.name)
	mod, err := p.rt.InstantiateModule(ctx, p.cm, wazero.NewModuleConfig().
		WithName(""). // anonymous, so instances of one module coexist
		WithStartFunctions(exportInitialize).
		WithStdout(out).
		WithStderr(out))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("instantiate: %w: %w", ErrTimeout, err)
		}
		return nil, fmt.Errorf("instantiate: %w", err)
	}
	res, err := mod.ExportedFunction(exportABIVersion).Call(ctx)
	if err != nil {
		_ = mod.Close(ctx)
		return nil, fmt.Errorf("%s: %w", exportABIVersion, err)
	}
	if v := api.DecodeI32(res[0]); v != ABIVersion {
		_ = mod.Close(ctx)
		return nil, fmt.Errorf("%s returned %d, this host supports ABI version %d", exportABIVersion, v, ABIVersion)
	}
	inst := &instance{
		mod:   mod,
		alloc: mod.ExportedFunction(exportAlloc),
		free:  mod.ExportedFunction(exportFree),
		hooks: map[string]api.Function{},
		// Halfway between the size after _initialize and the limit, so a module that starts
		// near the limit is not replaced after every call.
		recycleAt: (uint64(mod.Memory().Size()) + p.limitBytes) / 2,
	}
	for _, h := range p.hooks {
		inst.hooks[h] = mod.ExportedFunction(hookExports[h])
	}
	return inst, nil
}

// acquire takes an instance from the pool, creating one for a free slot.
func (p *Plugin) acquire(ctx context.Context, hook string) (*instance, error) {
	if p.closed.Load() {
		return nil, p.errorf(hook, ErrClosed, "closed")
	}
	var inst *instance
	select {
	case inst = <-p.pool:
	case <-ctx.Done():
		return nil, p.ctxError(ctx, hook, "waiting for a free instance", ctx.Err())
	}
	if inst != nil {
		return inst, nil
	}
	// A free slot: instantiate in the background, so the call still ends at its deadline;
	// an instance that arrives late goes into the pool.
	type result struct {
		inst *instance
		err  error
	}
	done := make(chan result, 1)
	go func() {
		inst, err := p.buildInstance(ctx)
		done <- result{inst, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			p.pool <- nil
			return nil, p.instanceError(hook, r.err)
		}
		return r.inst, nil
	case <-ctx.Done():
		go func() {
			if r := <-done; r.err != nil {
				p.pool <- nil
			} else {
				p.pool <- r.inst
			}
		}()
		return nil, p.ctxError(ctx, hook, "waiting for a new instance", ctx.Err())
	}
}

func (p *Plugin) instanceError(hook string, err error) error {
	if p.closed.Load() {
		return p.errorf(hook, ErrClosed, "%v", err)
	}
	kind := ErrTrap
	if errors.Is(err, ErrTimeout) {
		kind = ErrTimeout
	}
	return p.errorf(hook, kind, "new instance: %v", err)
}

// release returns inst to the pool. An instance that failed or is due for recycling is closed
// and replaced in the background, so the next call does not pay for instantiation (about 8 ms
// for a Go guest) inside its deadline.
func (p *Plugin) release(inst *instance, callErr error) {
	inst.calls++
	if callErr == nil && !p.closed.Load() && inst.calls < recycleCalls && uint64(inst.mod.Memory().Size()) <= inst.recycleAt {
		p.pool <- inst
		return
	}
	_ = inst.mod.Close(context.Background()) // the instance is discarded either way
	go p.refill()
}

// refill puts a new instance into the pool, or a free slot when that fails: the next acquire
// then retries and reports the error.
func (p *Plugin) refill() {
	if p.closed.Load() {
		p.pool <- nil
		return
	}
	inst, err := p.buildInstance(context.Background())
	if err != nil {
		p.pool <- nil
		return
	}
	p.pool <- inst
}

// buildInstance is newInstance under the plugin's lifecycle lock: Close waits for instances
// being built (wazero must not close a runtime while a module is being instantiated in it) and
// none is built after it.
func (p *Plugin) buildInstance(ctx context.Context) (*instance, error) {
	p.lifecycle.RLock()
	defer p.lifecycle.RUnlock()
	if p.closed.Load() {
		return nil, ErrClosed
	}
	return p.newInstance(ctx)
}

// invoke runs the ABI sequence of one call and returns a copy of the raw reply.
func (p *Plugin) invoke(ctx context.Context, inst *instance, hook string, req []byte) ([]byte, error) {
	mem := inst.mod.Memory()
	res, err := inst.alloc.Call(ctx, uint64(len(req)))
	if err != nil {
		return nil, p.callError(ctx, hook, exportAlloc, err)
	}
	inPtr := api.DecodeU32(res[0])
	if !mem.Write(inPtr, req) {
		return nil, p.errorf(hook, ErrABI, "%s(%d) returned %d, outside the %d-byte memory", exportAlloc, len(req), inPtr, mem.Size())
	}
	res, err = inst.hooks[hook].Call(ctx, uint64(inPtr), uint64(len(req)))
	if err != nil {
		return nil, p.callError(ctx, hook, hookExports[hook], err)
	}
	if _, err := inst.free.Call(ctx, uint64(inPtr), uint64(len(req))); err != nil {
		return nil, p.callError(ctx, hook, exportFree, err)
	}
	outPtr, outLen := unpack(res[0])
	if int64(outLen) > int64(p.opts.MaxReplyBytes) {
		return nil, p.errorf(hook, ErrInvalidReply, "reply of %d bytes exceeds the %d-byte limit", outLen, p.opts.MaxReplyBytes)
	}
	view, ok := mem.Read(outPtr, outLen)
	if !ok {
		return nil, p.errorf(hook, ErrABI, "reply at %d+%d is outside the %d-byte memory", outPtr, outLen, mem.Size())
	}
	out := bytes.Clone(view) // Read returns a view into guest memory
	if _, err := inst.free.Call(ctx, uint64(outPtr), uint64(outLen)); err != nil {
		return nil, p.callError(ctx, hook, exportFree, err)
	}
	return out, nil
}

// callError classifies an error from a guest function.
func (p *Plugin) callError(ctx context.Context, hook, fn string, err error) error {
	if ctx.Err() != nil {
		return p.ctxError(ctx, hook, fn, err)
	}
	if p.closed.Load() {
		return p.errorf(hook, ErrClosed, "%s: %v", fn, err)
	}
	return p.errorf(hook, ErrTrap, "%s: %v", fn, err)
}

func (p *Plugin) ctxError(ctx context.Context, hook, what string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("plugin %s: hook %s: %w (limit %s): %s: %w", p.name, hook, ErrTimeout, p.opts.CallTimeout, what, err)
	}
	return fmt.Errorf("plugin %s: hook %s: %w: %s: %w", p.name, hook, ctx.Err(), what, err)
}

// idleMemoryBytes returns the linear memory size of an idle instance, for `plugin run
// --bench`; ok is false when no built instance is idle.
func (p *Plugin) idleMemoryBytes() (size uint32, ok bool) {
	select {
	case inst := <-p.pool:
		defer func() { p.pool <- inst }()
		if inst == nil {
			return 0, false
		}
		return inst.mod.Memory().Size(), true
	default:
		return 0, false
	}
}

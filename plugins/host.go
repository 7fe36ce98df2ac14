package plugins

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/assemblyscript"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Defaults of Options.
const (
	DefaultMemoryLimitPages = 512 // 32 MiB; a stock-Go module declares 42 pages at start
	DefaultCallTimeout      = 100 * time.Millisecond
	DefaultPoolSize         = 4
	DefaultMaxReplyBytes    = 64 << 10
)

const (
	// maxModuleBytes caps a module file, and a .wasm.gz after decompression.
	maxModuleBytes = 64 << 20
	// maxOutputBytes caps what one instance may write to stdout and stderr over its life.
	maxOutputBytes = 64 << 10
	// recycleCalls is how many calls an instance serves before it is replaced.
	recycleCalls = 10_000
	// minInstantiateTimeout is the least time an instance gets to run _initialize.
	minInstantiateTimeout = time.Second
)

// cache is shared by every plugin runtime: loading the same bytes again (a reload of an
// unchanged file, tests) compiles once. Entries are reference counted and dropped when the
// last plugin using them closes.
var cache = wazero.NewCompilationCache()

// Options configure a Plugin. The zero value uses the defaults.
type Options struct {
	// MemoryLimitPages caps the guest memory in 64 KiB pages. Default: 512 (32 MiB). A module
	// declaring more initial memory fails to load.
	MemoryLimitPages uint32
	// CallTimeout bounds every hook call, including waiting for a free instance.
	// Default: 100ms.
	CallTimeout time.Duration
	// PoolSize is the most instances serving calls at once. Default: 4.
	PoolSize int
	// MaxReplyBytes caps the size of a reply. Default: 64 KiB.
	MaxReplyBytes int
	// Stderr receives what the guest writes to stdout and stderr (Go guests write panics
	// there), at most 64 KiB per instance. It must be safe for concurrent use. Default: one
	// slog.Warn record per write, with the plugin name.
	Stderr io.Writer
}

func (o Options) withDefaults() (Options, error) {
	if o.MemoryLimitPages == 0 {
		o.MemoryLimitPages = DefaultMemoryLimitPages
	}
	if o.MemoryLimitPages > 65536 {
		return o, fmt.Errorf("memory limit of %d pages is above the wasm maximum of 65536", o.MemoryLimitPages)
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.PoolSize == 0 {
		o.PoolSize = DefaultPoolSize
	}
	if o.MaxReplyBytes == 0 {
		o.MaxReplyBytes = DefaultMaxReplyBytes
	}
	var errs []error
	if o.CallTimeout < 0 {
		errs = append(errs, fmt.Errorf("call timeout %s is negative", o.CallTimeout))
	}
	if o.PoolSize < 0 {
		errs = append(errs, fmt.Errorf("pool size %d is negative", o.PoolSize))
	}
	if o.MaxReplyBytes < 0 {
		errs = append(errs, fmt.Errorf("max reply bytes %d is negative", o.MaxReplyBytes))
	}
	return o, errors.Join(errs...)
}

// Plugin is a loaded plugin module, safe for concurrent use.
//
// Here's an example:
//
//	p, err := plugins.Load(ctx, "/etc/ccm/plugins/labels.wasm.gz", plugins.Options{})
//	if err != nil {
//		return err // names the file and the reason: bad ABI version, forbidden import, ...
//	}
//	defer p.Close(ctx)
//	labels, err := p.NodeLabels(ctx, in) // validated; on error use the built-in behaviour
//
// # Notes
//
//   - The module is compiled once, in its own wazero.Runtime. Calls run on a pool of up to
//     Options.PoolSize instances, created on demand (the first at load). An instance serves
//     one call at a time; after any error it is discarded and a fresh one is made in the
//     background.
//     It is also replaced after 10,000 calls, or once its memory passes halfway from its size
//     after _initialize to the limit, since wasm memory never shrinks.
//   - The guest has no filesystem, network, environment or arguments, fake deterministic
//     clocks and a deterministic random source (wazero's defaults). WASI is provided when the
//     module imports it (stock Go guests do) and AssemblyScript's env.abort when imported;
//     any other import is refused at load.
type Plugin struct {
	name       string
	opts       Options
	rt         wazero.Runtime
	cm         wazero.CompiledModule
	hooks      []string
	pool       chan *instance // nil entries are free slots
	closed     atomic.Bool
	limitBytes uint64 // the memory limit
}

// Load reads a plugin module from path and loads it with LoadBytes. A file ending in ".gz", or
// starting with the gzip magic, is decompressed first (at most 64 MiB), so a stock-Go plugin
// fits in a ConfigMap as labels.wasm.gz.
//
// # Errors
//
// The error names the path and the reason: unreadable file, bad gzip, too large, or any
// LoadBytes error.
func Load(ctx context.Context, path string, o Options) (*Plugin, error) {
	wasm, err := readModule(path)
	if err != nil {
		return nil, fmt.Errorf("load plugin %s: %w", path, err)
	}
	return LoadBytes(ctx, path, wasm, o)
}

func readModule(path string) ([]byte, error) {
	raw, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return decompress(path, raw)
}

// readFile reads at most maxModuleBytes of path.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxModuleBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxModuleBytes {
		return nil, fmt.Errorf("file larger than %d bytes", maxModuleBytes)
	}
	return b, nil
}

// decompress gunzips b when path ends in ".gz" or b starts with the gzip magic.
func decompress(path string, b []byte) ([]byte, error) {
	if !strings.HasSuffix(path, ".gz") && !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		return b, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	b, err = io.ReadAll(io.LimitReader(zr, maxModuleBytes+1))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	if len(b) > maxModuleBytes {
		return nil, fmt.Errorf("decompressed module larger than %d bytes", maxModuleBytes)
	}
	return b, nil
}

// LoadBytes compiles wasm, checks it against ABI v1 and creates its first instance. name
// identifies the plugin in errors and logs (Load uses the file path).
//
// # Errors
//
// The error names the plugin and the reason: invalid options, invalid wasm, memory declared
// above the limit, a forbidden import (listed), a missing export or one with the wrong
// signature, no hook exported, _initialize failing or running over the time limit, or
// ccm_abi_version not returning 1.
func LoadBytes(ctx context.Context, name string, wasm []byte, o Options) (*Plugin, error) {
	p, err := loadBytes(ctx, name, wasm, o)
	if err != nil {
		return nil, fmt.Errorf("load plugin %s: %w", name, err)
	}
	return p, nil
}

func loadBytes(ctx context.Context, name string, wasm []byte, o Options) (*Plugin, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.Stderr == nil {
		o.Stderr = logWriter{plugin: name}
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(o.MemoryLimitPages).
		WithCompilationCache(cache))
	p := &Plugin{name: name, opts: o, rt: rt, limitBytes: uint64(o.MemoryLimitPages) * 65536}
	if err := p.init(ctx, wasm); err != nil {
		_ = rt.Close(ctx) // don't overwrite the error
		return nil, err
	}
	return p, nil
}

func (p *Plugin) init(ctx context.Context, wasm []byte) error {
	cm, err := p.rt.CompileModule(ctx, wasm)
	if err != nil {
		return fmt.Errorf("compile: %w", err)
	}
	p.cm = cm
	needWASI, needEnv, err := checkImports(cm)
	if err != nil {
		return err
	}
	if p.hooks, err = checkExports(cm); err != nil {
		return err
	}
	if needWASI {
		if _, err := wasi_snapshot_preview1.Instantiate(ctx, p.rt); err != nil {
			return fmt.Errorf("instantiate wasi: %w", err)
		}
	}
	if needEnv {
		if _, err := assemblyscript.Instantiate(ctx, p.rt); err != nil {
			return fmt.Errorf("instantiate env.abort: %w", err)
		}
	}
	inst, err := p.newInstance(ctx)
	if err != nil {
		return err
	}
	p.pool = make(chan *instance, max(p.opts.PoolSize, 1))
	p.pool <- inst
	for range cap(p.pool) - 1 {
		p.pool <- nil
	}
	return nil
}

// checkImports refuses imports other than WASI functions and env.abort, listing them all.
func checkImports(cm wazero.CompiledModule) (needWASI, needEnv bool, err error) {
	var bad []string
	for _, def := range cm.ImportedFunctions() {
		mod, name, _ := def.Import()
		switch {
		case mod == importModuleWASI:
			needWASI = true
		case mod == importModuleEnv && name == importEnvAbort:
			needEnv = true
		default:
			bad = append(bad, "function "+mod+"."+name)
		}
	}
	for _, def := range cm.ImportedMemories() {
		mod, name, _ := def.Import()
		bad = append(bad, "memory "+mod+"."+name)
	}
	if len(bad) > 0 {
		return false, false, fmt.Errorf("forbidden imports: %s (allowed: %s.* functions and %s.%s)",
			strings.Join(bad, ", "), importModuleWASI, importModuleEnv, importEnvAbort)
	}
	return needWASI, needEnv, nil
}

type signature struct{ params, results []api.ValueType }

func (s signature) String() string {
	names := func(ts []api.ValueType) string {
		var out []string
		for _, t := range ts {
			out = append(out, api.ValueTypeName(t))
		}
		return "(" + strings.Join(out, ", ") + ")"
	}
	return names(s.params) + " -> " + names(s.results)
}

var (
	i32, i64 = api.ValueTypeI32, api.ValueTypeI64
	required = map[string]signature{
		exportABIVersion: {nil, []api.ValueType{i32}},
		exportAlloc:      {[]api.ValueType{i32}, []api.ValueType{i32}},
		exportFree:       {[]api.ValueType{i32, i32}, nil},
	}
	hookSignature = signature{[]api.ValueType{i32, i32}, []api.ValueType{i64}}
	initSignature = signature{}
)

// checkExports checks the memory, the ABI functions and the hooks, and returns the hooks.
func checkExports(cm wazero.CompiledModule) ([]string, error) {
	var errs []error
	if _, ok := cm.ExportedMemories()[exportMemory]; !ok {
		errs = append(errs, errors.New(`missing export "memory"`))
	}
	funcs := cm.ExportedFunctions()
	check := func(name string, want signature, optional bool) bool {
		def, ok := funcs[name]
		if !ok {
			if !optional {
				errs = append(errs, fmt.Errorf("missing export %q %s", name, want))
			}
			return false
		}
		got := signature{def.ParamTypes(), def.ResultTypes()}
		if !slices.Equal(got.params, want.params) || !slices.Equal(got.results, want.results) {
			errs = append(errs, fmt.Errorf("export %q has signature %s, want %s", name, got, want))
			return false
		}
		return true
	}
	for _, name := range []string{exportABIVersion, exportAlloc, exportFree} {
		check(name, required[name], false)
	}
	check(exportInitialize, initSignature, true)
	var hooks []string
	for _, h := range hookOrder {
		if check(hookExports[h], hookSignature, true) {
			hooks = append(hooks, h)
		}
	}
	if len(hooks) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("exports no hook (one of %s, %s)", hookExports[HookNodeLabels], hookExports[HookLoadBalancerName]))
	}
	return hooks, errors.Join(errs...)
}

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
	out := &cappedWriter{w: p.opts.Stderr, left: maxOutputBytes}
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
	if v := int32(res[0]); v != ABIVersion {
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

// Name returns the name the plugin was loaded with (Load: the file path).
func (p *Plugin) Name() string { return p.name }

// Hooks returns the hooks the module exports, in a fixed order.
func (p *Plugin) Hooks() []string { return slices.Clone(p.hooks) }

// Has reports whether the module exports hook.
func (p *Plugin) Has(hook string) bool { return slices.Contains(p.hooks, hook) }

// NodeLabels calls the node_labels hook and returns the labels to add, validated with
// ValidateLabels. The returned map is never nil when err is nil.
//
// # Errors
//
// Every error names the plugin, the hook and the reason, and wraps one of the Err* sentinels
// (see Reason). The plugin keeps serving after an error.
func (p *Plugin) NodeLabels(ctx context.Context, in NodeInput) (map[string]string, error) {
	var r NodeLabelsReply
	if err := p.call(ctx, HookNodeLabels, in, &r); err != nil {
		return nil, err
	}
	if r.Error != "" {
		return nil, p.errorf(HookNodeLabels, ErrPluginError, "%s", r.Error)
	}
	if err := ValidateLabels(r.Labels); err != nil {
		return nil, p.errorf(HookNodeLabels, ErrInvalidReply, "%v", err)
	}
	if r.Labels == nil {
		r.Labels = map[string]string{}
	}
	return r.Labels, nil
}

// LoadBalancerName calls the load_balancer_name hook and returns the name, validated with
// ValidateLoadBalancerName.
//
// # Errors
//
// As for NodeLabels.
func (p *Plugin) LoadBalancerName(ctx context.Context, in LoadBalancerNameInput) (string, error) {
	var r LoadBalancerNameReply
	if err := p.call(ctx, HookLoadBalancerName, in, &r); err != nil {
		return "", err
	}
	if r.Error != "" {
		return "", p.errorf(HookLoadBalancerName, ErrPluginError, "%s", r.Error)
	}
	if err := ValidateLoadBalancerName(r.Name); err != nil {
		return "", p.errorf(HookLoadBalancerName, ErrInvalidReply, "%v", err)
	}
	return r.Name, nil
}

// Close releases the runtime and every instance. Calls in flight fail; later calls return
// ErrClosed. Close is idempotent.
func (p *Plugin) Close(ctx context.Context) error {
	if p.closed.Swap(true) {
		return nil
	}
	return p.rt.Close(ctx)
}

// maxDetailBytes caps the detail of an error: a guest controls it (error replies, label keys),
// and it ends up in logs and events.
const maxDetailBytes = 1024

func (p *Plugin) errorf(hook string, kind error, format string, args ...any) error {
	detail := fmt.Sprintf(format, args...)
	if len(detail) > maxDetailBytes {
		detail = strings.ToValidUTF8(detail[:maxDetailBytes], "") + "... (truncated)"
	}
	return fmt.Errorf("plugin %s: hook %s: %w: %s", p.name, hook, kind, detail)
}

// call runs one hook call: request in, strictly decoded reply out.
func (p *Plugin) call(ctx context.Context, hook string, req, reply any) error {
	if _, ok := hookExports[hook]; !ok || !p.Has(hook) {
		return p.errorf(hook, ErrNotExported, "the module exports %s", p.exportList())
	}
	in, err := json.Marshal(req)
	if err != nil {
		return p.errorf(hook, ErrInvalidReply, "encode request: %v", err) // unreachable with the hook types
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.CallTimeout)
	defer cancel()
	inst, err := p.acquire(ctx, hook)
	if err != nil {
		return err
	}
	out, err := p.invoke(ctx, inst, hook, in)
	p.release(inst, err)
	if err != nil {
		return err
	}
	if err := decodeStrict(out, reply); err != nil {
		return p.errorf(hook, ErrInvalidReply, "%v", err)
	}
	return nil
}

func (p *Plugin) exportList() string {
	if len(p.hooks) == 0 {
		return "no hook"
	}
	return "only " + strings.Join(p.hooks, ", ")
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
		inst, err := p.newInstance(ctx)
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
	inst, err := p.newInstance(context.Background())
	if err != nil {
		p.pool <- nil
		return
	}
	p.pool <- inst
}

// invoke runs the ABI sequence of one call and returns a copy of the raw reply.
func (p *Plugin) invoke(ctx context.Context, inst *instance, hook string, req []byte) ([]byte, error) {
	mem := inst.mod.Memory()
	res, err := inst.alloc.Call(ctx, uint64(len(req)))
	if err != nil {
		return nil, p.callError(ctx, hook, exportAlloc, err)
	}
	inPtr := uint32(res[0])
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
		return fmt.Errorf("plugin %s: hook %s: %w (limit %s): %s: %v", p.name, hook, ErrTimeout, p.opts.CallTimeout, what, err)
	}
	return fmt.Errorf("plugin %s: hook %s: %w: %s: %v", p.name, hook, ctx.Err(), what, err)
}

// decodeStrict decodes exactly one JSON object with no unknown fields into v.
func decodeStrict(b []byte, v any) error {
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("reply is not a JSON object: %.80q", b)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode reply %.80q: %w", b, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("decode reply %.80q: data after the JSON object", b)
	}
	return nil
}

// cappedWriter passes at most left bytes to w, then notes the truncation once.
type cappedWriter struct {
	w    io.Writer
	left int
	done bool
}

func (c *cappedWriter) Write(b []byte) (int, error) {
	switch {
	case c.done:
	case len(b) <= c.left:
		c.left -= len(b)
		_, _ = c.w.Write(b) // guest output is best effort; never fail the guest's write
	default:
		_, _ = c.w.Write(b[:c.left])
		_, _ = io.WriteString(c.w, "\n[plugin output truncated]\n")
		c.done = true
	}
	return len(b), nil
}

// logWriter logs each write of guest output as one record.
type logWriter struct{ plugin string }

func (l logWriter) Write(b []byte) (int, error) {
	slog.Warn("plugin output", "plugin", l.plugin, "text", strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

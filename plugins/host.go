package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
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
	// there) within the plugin's output budget: a burst of 16 KiB, then 1 KiB/s, shared by
	// every instance and revision of the plugin (by name), each write costing at least 128
	// bytes. Output over the budget is dropped (one note when dropping starts) and counted in
	// hcloud_ccm_plugin_output_dropped_bytes_total{plugin} (see RegisterMetrics). It must be
	// safe for concurrent use. Default: one slog.Warn record per write, with the plugin name.
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
	return o, joinErrors(errs)
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
//     background. It is also replaced after 10,000 calls, or once its memory passes halfway
//     from its size after _initialize to the limit, since wasm memory never shrinks.
//   - The guest has no filesystem, network, environment or arguments, fake deterministic
//     clocks and a deterministic random source (wazero's defaults). WASI is provided when the
//     module imports it (stock Go guests do) and AssemblyScript's env.abort when imported;
//     any other import is refused at load.
type Plugin struct {
	name   string
	opts   Options
	rt     wazero.Runtime
	cm     wazero.CompiledModule
	hooks  []string
	pool   chan *instance // nil entries are free slots
	closed atomic.Bool
	// lifecycle is held (read) while an instance is built and (write) while the runtime closes.
	lifecycle  sync.RWMutex
	limitBytes uint64 // the memory limit
}

// Name returns the name the plugin was loaded with (Load: the file path).
func (p *Plugin) Name() string { return p.name }

// Hooks returns the hooks the module exports, in a fixed order.
func (p *Plugin) Hooks() []string { return slices.Clone(p.hooks) }

// Has reports whether the module exports hook.
func (p *Plugin) Has(hook string) bool { return slices.Contains(p.hooks, hook) }

// NodeLabels calls the node_labels hook and returns the labels to add, validated with
// ValidateLabels: callers use them as they are. The returned map is never nil when err is nil.
// Every call is timed in hcloud_ccm_plugin_call_duration_seconds{hook="node_labels"}; a failed
// one counts in hcloud_ccm_plugin_failures_total{hook="node_labels"}.
//
// # Errors
//
// Every error names the plugin, the hook and the reason, and wraps one of the Err* sentinels
// (see Reason). The plugin keeps serving after an error.
func (p *Plugin) NodeLabels(ctx context.Context, in NodeInput) (map[string]string, error) {
	start := time.Now()
	labels, err := p.nodeLabels(ctx, in)
	return labels, observeCall(HookNodeLabels, start, err)
}

func (p *Plugin) nodeLabels(ctx context.Context, in NodeInput) (map[string]string, error) {
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
// ValidateLoadBalancerName (Hetzner's rule): callers use it as it is. Every call is timed in
// hcloud_ccm_plugin_call_duration_seconds{hook="load_balancer_name"}; a failed one counts in
// hcloud_ccm_plugin_failures_total{hook="load_balancer_name"}.
//
// # Errors
//
// As for NodeLabels.
func (p *Plugin) LoadBalancerName(ctx context.Context, in LoadBalancerNameInput) (string, error) {
	start := time.Now()
	name, err := p.loadBalancerName(ctx, in)
	return name, observeCall(HookLoadBalancerName, start, err)
}

func (p *Plugin) loadBalancerName(ctx context.Context, in LoadBalancerNameInput) (string, error) {
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
	p.lifecycle.Lock() // wait for instances being built
	defer p.lifecycle.Unlock()
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

// logWriter logs each write of guest output as one record.
type logWriter struct{ plugin string }

func (l logWriter) Write(b []byte) (int, error) {
	slog.Warn("plugin output", "plugin", l.plugin, "text", strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

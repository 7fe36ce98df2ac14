package plugins

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/assemblyscript"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

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

// errCommand explains a WASI command module: Go without -buildmode=c-shared (or a Rust bin
// crate) exports _start and no _initialize, and its hooks trap with "unreachable" since the
// runtime was never started.
var errCommand = errors.New("the module is a WASI command (exports _start, no _initialize), not a reactor: " +
	"build a Go plugin with -buildmode=c-shared (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o plugin.wasm .), " +
	`a Rust one as a library (crate-type = ["cdylib"])`)

// checkExports checks the memory, the ABI functions and the hooks, and returns the hooks.
func checkExports(cm wazero.CompiledModule) ([]string, error) {
	funcs := cm.ExportedFunctions()
	_, start := funcs[exportStart]
	if _, initialize := funcs[exportInitialize]; start && !initialize {
		return nil, errCommand
	}
	var errs []error
	if _, ok := cm.ExportedMemories()[exportMemory]; !ok {
		errs = append(errs, errors.New(`missing export "memory"`))
	}
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
	return hooks, joinErrors(errs)
}

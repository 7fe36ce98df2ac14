package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// RunCLI loads the module at modulePath, calls hook with the JSON request in inputFile ("-"
// reads standard input) and writes the validated reply to w as indented JSON:
// {"labels": {...}} for node_labels, {"name": "..."} for load_balancer_name. Guest output goes
// to standard error. It backs `<ccm> plugin run --module FILE --hook HOOK --input FILE`.
//
// Here's an example:
//
//	err := plugins.RunCLI(ctx, "labels.wasm.gz", plugins.HookNodeLabels, "node.json", os.Stdout)
//
// # Errors
//
// Unknown hook, unreadable or invalid input (unknown fields are refused, to catch typos), any
// Load error, and any call error, with the plugin, the hook and the reason.
func RunCLI(ctx context.Context, modulePath, hook, inputFile string, w io.Writer) error {
	if _, ok := hookExports[hook]; !ok {
		return fmt.Errorf("plugin run: unknown hook %q (known: %s, %s)", hook, HookNodeLabels, HookLoadBalancerName)
	}
	input, err := readInput(inputFile)
	if err != nil {
		return fmt.Errorf("plugin run: read input: %w", err)
	}
	p, err := Load(ctx, modulePath, Options{Stderr: os.Stderr})
	if err != nil {
		return err
	}
	defer p.Close(ctx)
	reply, err := callJSON(ctx, p, hook, input)
	if err != nil {
		return fmt.Errorf("plugin run: input %s: %w", inputFile, err)
	}
	out, err := json.MarshalIndent(reply, "", "  ")
	if err != nil {
		return fmt.Errorf("plugin run: encode reply: %w", err)
	}
	_, err = w.Write(append(out, '\n'))
	return err
}

func readInput(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(io.LimitReader(os.Stdin, maxModuleBytes))
	}
	return os.ReadFile(path)
}

func decodeInput(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("data after the JSON object")
	}
	return nil
}

// callJSON decodes input strictly as the request of hook, calls it, and returns the validated
// reply as the hook's reply type. A request that does not decode is an error that says so; a
// failed call returns the host's error unchanged (wrapped once).
func callJSON(ctx context.Context, p *Plugin, hook string, input []byte) (any, error) {
	switch hook {
	case HookNodeLabels:
		var in NodeInput
		if err := decodeInput(input, &in); err != nil {
			return nil, fmt.Errorf("decode request: %w", err)
		}
		labels, err := p.NodeLabels(ctx, in)
		if err != nil {
			return nil, err
		}
		return NodeLabelsReply{Labels: labels}, nil
	case HookLoadBalancerName:
		var in LoadBalancerNameInput
		if err := decodeInput(input, &in); err != nil {
			return nil, fmt.Errorf("decode request: %w", err)
		}
		name, err := p.LoadBalancerName(ctx, in)
		if err != nil {
			return nil, err
		}
		return LoadBalancerNameReply{Name: name}, nil
	}
	return nil, fmt.Errorf("unknown hook %q (known: %s, %s)", hook, HookNodeLabels, HookLoadBalancerName)
}

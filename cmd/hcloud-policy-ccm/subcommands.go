package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// newPolicyCommand returns "policy eval", "policy test", "policy capabilities", "policy samples"
// and "policy schema": the tools an operator runs on policies before shipping them.
func newPolicyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Evaluate and test Rego policies offline, with the CCM's own engine and sandbox",
	}
	var dir, input, mode, failure, logLine string
	eval := &cobra.Command{
		Use:   "eval --policies DIR --input FILE",
		Short: "Print the decision of the policies in DIR for the input document in FILE (- for stdin)",
		Long: `Load DIR as --policy-dir does (flat, vetted, type checked) and print the decision for one
input document as JSON. It exits non-zero when the mutation would not be allowed.`,
		Example: `  hcloud-policy-ccm policy eval --policies examples/policies --input examples/policies/inputs/lb_create_default.json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" || (input == "") == (logLine == "") {
				return errors.New("policy eval: --policies and one of --input or --decision-log-line are required (for example --policies examples/policies --input examples/policies/inputs/lb_create_default.json)")
			}
			o := policy.Options{Mode: policy.Mode(mode), FailureMode: policy.FailureMode(failure)}
			if err := o.Validate(); err != nil {
				return fmt.Errorf("policy eval: %w", err)
			}
			if logLine != "" {
				if err := policy.ReplayDecisionLogLine(cmd.Context(), dir, logLine, cmd.OutOrStdout(), o); err != nil {
					return fmt.Errorf("policy eval: %w", err)
				}
				return nil
			}
			return policy.EvalFile(cmd.Context(), dir, input, cmd.OutOrStdout(), o)
		},
	}
	eval.Flags().StringVar(&dir, "policies", "", "directory of policies and data files")
	eval.Flags().StringVar(&input, "input", "", "JSON input document (see docs/reference/policy-input.md); - reads stdin")
	eval.Flags().StringVar(&logLine, "decision-log-line", "", "replay one line of --policy-decision-log (a file, - for stdin): evaluate its input, say whether the result equals the logged one (exit 1 if not); its policy_mode and failure_mode labels override --mode and --failure-mode")
	eval.Flags().StringVar(&mode, "mode", "enforce", "enforce or dryrun")
	eval.Flags().StringVar(&failure, "failure-mode", "closed", "closed or open")

	var topts policy.TestOptions
	test := &cobra.Command{
		Use:   "test [flags] DIR|FILE...",
		Short: "Run the Rego tests of a policy revision exactly as the CCM does before loading it (the faithful CI check)",
		Long: `Run the Rego tests (test_* rules in *_test.rego files) of one policy revision as the CCM
runs them before it puts the revision in force:

  - the directories are read flat, like a policy ConfigMap or --policy-dir: files in
    subdirectories (an inputs/ directory of fixtures) are not loaded;
  - the revision must compile in strict mode with the sandbox capabilities, pass the type
    check against the input schema, and decide every shipped sample input without error;
  - tests run with strict built-in errors; data.inputs holds the shipped sample inputs
    merged with the revision's own data.inputs.

It exits non-zero when the revision would be rejected, a test fails, or no test is found.`,
		Example: `  hcloud-policy-ccm policy test -v examples/policies
  hcloud-policy-ccm policy test --coverage --threshold 80 examples/policies
  hcloud-policy-ccm policy test --explain fails examples/policies`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			failed, err := policy.RunTests(cmd.Context(), args, cmd.OutOrStdout(), topts)
			if err != nil {
				return fmt.Errorf("policy test: %w", err)
			}
			if failed > 0 {
				return fmt.Errorf("policy test: %d test(s) failed", failed)
			}
			return nil
		},
	}
	test.Flags().BoolVarP(&topts.Verbose, "verbose", "v", false, "list every test, as opa test -v")
	test.Flags().BoolVar(&topts.Coverage, "coverage", false, "print the coverage report as JSON instead of the test list, as opa test --coverage")
	test.Flags().Float64Var(&topts.Threshold, "threshold", 0, "fail when coverage is below this percentage (implies --coverage)")
	test.Flags().StringVar(&topts.Explain, "explain", "", "print the trace of failing tests: fails (the failing expressions) or full (every step)")
	caps := &cobra.Command{
		Use:   "capabilities",
		Short: "Print the sandbox capabilities as JSON, for opa check/test --capabilities FILE",
		Example: `  hcloud-policy-ccm policy capabilities > capabilities.json
  opa check --strict --capabilities capabilities.json --schema docs/policy-input.schema.json policies/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(policy.Capabilities())
		},
	}
	cmd.AddCommand(eval, test, caps, newSamplesCommand(), newSchemaCommand())
	return cmd
}

// newSamplesCommand returns "policy samples": write the shipped sample inputs for bare opa.
func newSamplesCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "samples --out DIR",
		Short: "Write the shipped sample inputs to DIR/inputs, for opa test policies/ DIR (data.inputs.NAME, as the CCM gives its tests)",
		Long: `Write the sample inputs built into this binary (the files of examples/policies/inputs) to
DIR/inputs/NAME.json. opa loads them as data.inputs.NAME, which the CCM gives the Rego tests
of every revision, so that tests starting from data.inputs.NAME pass with bare opa too.
Keep DIR apart from the policy directory: the CCM does not load subdirectories.`,
		Example: `  hcloud-policy-ccm policy samples --out policy-samples/
  opa test --capabilities capabilities.json policies/ policy-samples/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("policy samples: --out is required (for example --out policy-samples/)")
			}
			written, err := policy.WriteSamples(out)
			if err != nil {
				return fmt.Errorf("policy samples: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d sample inputs to %s (data.inputs.NAME for opa test POLICY_DIR %s)\n",
				len(written), filepath.Join(out, policy.SamplesSubdir), out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory to write to; the samples go to DIR/inputs/NAME.json")
	return cmd
}

// newSchemaCommand returns "policy schema": print the input's JSON Schema for opa check --schema.
func newSchemaCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the policy input (docs/policy-input.schema.json), for opa check --schema FILE",
		Example: `  hcloud-policy-ccm policy schema > policy-input.schema.json
  opa check --strict --schema policy-input.schema.json policies/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(policy.InputSchema())
			return err
		},
	}
}

// newPluginCommand returns "plugin run", "plugin test", "plugin check" and "plugin schema": the
// tools a plugin author runs on a module, in the CCM's own sandbox.
func newPluginCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Run, test, time and check wasm plugins offline, in the CCM's sandbox",
	}
	var module, hook, input string
	var bench int
	run := &cobra.Command{
		Use:   "run --module FILE --hook HOOK --input FILE [--bench N]",
		Short: "Call HOOK (node_labels or load_balancer_name) of the module with the JSON request in FILE and print the validated reply; --bench N times N calls",
		Example: `  hcloud-policy-ccm plugin run --module node-labels.wasm.gz --hook node_labels --input node.json
  hcloud-policy-ccm plugin run --module node-labels.wasm.gz --hook node_labels --input node.json --bench 1000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if module == "" || hook == "" || input == "" {
				return errors.New("plugin run: --module, --hook and --input are required (for example --module node-labels.wasm --hook node_labels --input node.json)")
			}
			if bench == 0 {
				return plugins.RunCLI(cmd.Context(), module, hook, input, cmd.OutOrStdout())
			}
			r, err := plugins.Bench(cmd.Context(), module, hook, input, bench)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), r)
			return nil
		},
	}
	run.Flags().StringVar(&module, "module", "", "the .wasm or .wasm.gz module")
	run.Flags().StringVar(&hook, "hook", "", "node_labels or load_balancer_name")
	run.Flags().StringVar(&input, "input", "", "JSON request (see docs/plugins.md); - reads stdin")
	run.Flags().IntVar(&bench, "bench", 0, "instead of printing the reply, call the hook N times on one warm instance and print p50, p99, max and the instance's memory")
	cmd.AddCommand(run, newPluginTestCommand(), newPluginCheckCommand(), newPluginSchemaCommand(), newPluginInitCommand())
	return cmd
}

// newPluginTestCommand returns "plugin test": run a module against request/expected-reply files.
func newPluginTestCommand() *cobra.Command {
	var module string
	cmd := &cobra.Command{
		Use:   "test --module FILE DIR",
		Short: "Run the module against the cases in DIR (CASE.request.json and CASE.reply.json; in DIR/HOOK/ for a module with both hooks) and exit non-zero when one fails",
		Long: `Each case is CASE.request.json, the request, and CASE.reply.json, the reply expected after the
host's validation: {"labels": {...}} or {"name": "..."} (compared as JSON values), or
{"error": "TEXT"}, which passes when the call fails with an error containing TEXT. The hook is
the directory's name (DIR/node_labels/, DIR/load_balancer_name/) or, for files directly in
DIR, the module's only hook. Works for a module in any language.`,
		Example: `  hcloud-policy-ccm plugin test --module node-labels.wasm.gz plugins/examples/node-labels/testdata/cases`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if module == "" {
				return errors.New("plugin test: --module is required (for example --module node-labels.wasm.gz testdata/cases)")
			}
			_, err := plugins.RunTests(cmd.Context(), module, args[0], cmd.OutOrStdout())
			return err
		},
	}
	cmd.Flags().StringVar(&module, "module", "", "the .wasm or .wasm.gz module")
	return cmd
}

// newPluginCheckCommand returns "plugin check": sizes, ConfigMap fit, exports, ABI version.
func newPluginCheckCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "check MODULE...",
		Short: "Report each module's size (raw and gzipped), whether it fits a ConfigMap (1 MiB) alone and, given several, together, its hooks and ABI version; exit non-zero when one does not load or they do not fit",
		Example: `  hcloud-policy-ccm plugin check node-labels.wasm.gz
  hcloud-policy-ccm plugin check node-labels.wasm lb-name.wasm   # fit one ConfigMap together?`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := plugins.Check(cmd.Context(), args, cmd.OutOrStdout())
			return err
		},
	}
}

// newPluginInitCommand returns "plugin init": start a plugin project from an example.
func newPluginInitCommand() *cobra.Command {
	var lang string
	cmd := &cobra.Command{
		Use:   "init --lang go|rust|as DIR",
		Short: "Write a new plugin project into DIR: the repository's complete example in that language and its cases for plugin test",
		Example: `  hcloud-policy-ccm plugin init --lang go my-plugin
  hcloud-policy-ccm plugin init --lang rust my-plugin`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return plugins.Init(lang, args[0], cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&lang, "lang", "go", "go (both hooks, with the SDK), rust (serde, Debian's cargo) or as (AssemblyScript)")
	return cmd
}

// newPluginSchemaCommand returns "plugin schema": print a hook's request or reply JSON Schema.
func newPluginSchemaCommand() *cobra.Command {
	var hook string
	var reply bool
	cmd := &cobra.Command{
		Use:   "schema --hook HOOK [--reply]",
		Short: "Print the JSON Schema of HOOK's request (or, with --reply, its reply), as committed in plugins/schema/",
		Example: `  hcloud-policy-ccm plugin schema --hook node_labels > node_labels.request.schema.json
  hcloud-policy-ccm plugin schema --hook node_labels --reply`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := plugins.Schema(hook, reply)
			if err != nil {
				return fmt.Errorf("plugin %w", err)
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	cmd.Flags().StringVar(&hook, "hook", plugins.HookNodeLabels, "node_labels or load_balancer_name")
	cmd.Flags().BoolVar(&reply, "reply", false, "print the reply's schema instead of the request's")
	return cmd
}

// versionModules are the dependencies whose versions `version` prints: the policy engine, the
// wasm runtime and the Kubernetes libraries, the three that decide what a policy or plugin
// author can rely on (Rego built-ins, the plugin sandbox, the cloud-provider framework).
var versionModules = []string{
	"github.com/open-policy-agent/opa",
	"github.com/tetratelabs/wazero",
	"k8s.io/cloud-provider",
}

// newVersionCommand prints the build version (ccm.Version, stamped by the Makefile's LDFLAGS and
// deploy/Dockerfile), the Go release, and the versions of versionModules as linked into this
// binary (read from its build information, so they cannot drift from go.mod).
func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, and the Go, OPA, wazero and Kubernetes library versions it was built with",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			info, _ := debug.ReadBuildInfo()
			fmt.Fprint(cmd.OutOrStdout(), versionText(ccm.Version, info))
		},
	}
}

// versionText is the output of `version`: the first line is "hcloud-policy-ccm VERSION", then one
// "MODULE VERSION" line for Go and each of versionModules. A module missing from info (or info
// nil: a binary built without module support) prints "unknown" rather than failing, since the
// command exists to diagnose builds.
func versionText(version string, info *debug.BuildInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "hcloud-policy-ccm %s\n", version)
	goVersion := "unknown"
	deps := map[string]string{}
	if info != nil {
		goVersion = info.GoVersion
		for _, d := range info.Deps {
			v := d.Version
			if d.Replace != nil { // a replaced module reports the replacement's version
				v = d.Replace.Version
			}
			deps[d.Path] = v
		}
	}
	fmt.Fprintf(&b, "go %s\n", goVersion)
	for _, m := range versionModules {
		v := deps[m]
		if v == "" {
			v = "unknown"
		}
		fmt.Fprintf(&b, "%s %s\n", m, v)
	}
	return b.String()
}

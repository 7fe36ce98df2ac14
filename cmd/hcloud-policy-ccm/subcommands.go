package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// newPolicyCommand returns "policy eval" and "policy test": the tools an operator runs on
// policies before shipping them.
func newPolicyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Evaluate and test Rego policies offline, with the CCM's own engine and sandbox",
	}
	var dir, input, mode, failure string
	eval := &cobra.Command{
		Use:   "eval --policies DIR --input FILE",
		Short: "Print the decision of the policies in DIR for the input document in FILE (- for stdin)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" || input == "" {
				return errors.New("policy eval: --policies and --input are required (for example --policies examples/policies --input examples/policies/inputs/lb_create_default.json)")
			}
			o := policy.Options{Mode: policy.Mode(mode), FailureMode: policy.FailureMode(failure)}
			if err := o.Validate(); err != nil {
				return fmt.Errorf("policy eval: %w", err)
			}
			return policy.EvalFile(cmd.Context(), dir, input, cmd.OutOrStdout(), o)
		},
	}
	eval.Flags().StringVar(&dir, "policies", "", "directory of policies and data files")
	eval.Flags().StringVar(&input, "input", "", "JSON input document (see docs/reference/policy-input.md); - reads stdin")
	eval.Flags().StringVar(&mode, "mode", "enforce", "enforce or dryrun")
	eval.Flags().StringVar(&failure, "failure-mode", "closed", "closed or open")

	var verbose bool
	test := &cobra.Command{
		Use:   "test DIR...",
		Short: "Run the *_test.rego files in the directories, as opa test does, with the CCM's sandbox capabilities",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			failed, err := policy.RunTests(cmd.Context(), args, cmd.OutOrStdout(), verbose)
			if err != nil {
				return fmt.Errorf("policy test: %w", err)
			}
			if failed > 0 {
				return fmt.Errorf("policy test: %d test(s) failed", failed)
			}
			return nil
		},
	}
	test.Flags().BoolVar(&verbose, "verbose", false, "print every test")
	caps := &cobra.Command{
		Use:   "capabilities",
		Short: "Print the sandbox capabilities as JSON, for opa test/check --capabilities FILE",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(policy.Capabilities())
		},
	}
	cmd.AddCommand(eval, test, caps)
	return cmd
}

// newPluginCommand returns "plugin run": call one hook of a wasm module with a JSON input.
func newPluginCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Run wasm plugins offline, in the CCM's sandbox",
	}
	var module, hook, input string
	run := &cobra.Command{
		Use:   "run --module FILE --hook HOOK --input FILE",
		Short: "Call HOOK (node_labels or load_balancer_name) of the module with the JSON request in FILE and print the validated reply",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if module == "" || hook == "" || input == "" {
				return errors.New("plugin run: --module, --hook and --input are required (for example --module node-labels.wasm --hook node_labels --input node.json)")
			}
			return plugins.RunCLI(cmd.Context(), module, hook, input, cmd.OutOrStdout())
		},
	}
	run.Flags().StringVar(&module, "module", "", "the .wasm or .wasm.gz module")
	run.Flags().StringVar(&hook, "hook", "", "node_labels or load_balancer_name")
	run.Flags().StringVar(&input, "input", "", "JSON request (see docs/plugins.md); - reads stdin")
	cmd.AddCommand(run)
	return cmd
}

// newVersionCommand prints the build version.
func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "hcloud-policy-ccm %s\n", ccm.Version)
		},
	}
}

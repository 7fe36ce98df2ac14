package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/ciplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// exitError makes the tools exit with code after printing err (nil err: print nothing).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// badInput is an exitError with ciplan.ExitBadInput.
func badInput(err error) error { return &exitError{code: ciplan.ExitBadInput, err: err} }

// newPlanCommand returns "plan": the CCM's plan and policy verdicts for Service manifests,
// offline (ccm/ciplan).
func newPlanCommand() *cobra.Command {
	var files []string
	var fromAPI bool
	var policies, envFile, statePath, saveState, output, mode, failure, clusterName, clusterCIDR, decisionLog, pricesPath string
	cmd := &cobra.Command{
		Use:   "plan -f FILE|DIR|- --policies DIR [flags]",
		Short: "Show the load balancer requests the CCM would send for Service manifests, with each policy verdict (for CI)",
		Long: `Plan every Service of type LoadBalancer in the manifests (files, directories, - for stdin;
multi-document YAML; other kinds are skipped, Namespace manifests give their labels) with the
CCM's own planner and policy gate, and print each request with its verdict, deny and warn
messages, and the final load balancer. The environment (HCLOUD_*) comes from the process or
--env-file. The current load balancers come from --state (the JSON of GET
/v1/load_balancers) or --from-api (the Hetzner API, GET requests only), else every Service
is a create; --save-state writes the state the allowed plans would leave. The load balancers
of the state, then each Service's allowed steps in input order, are the inventory the policies
see (input.inventory). Costs come from --prices (the JSON of GET /v1/load_balancer_types) or
--from-api (which reads the prices too); without either they are unknown. No other network
request is made.

Exit status: 0 allowed, 1 denied, 2 bad input (a manifest, annotation, policy or flag).`,
		Example: `  kustomize build overlays/prod | hcloud-policy-ccm plan -f - --policies policies/
  hcloud-policy-ccm plan -f examples/manifests --policies examples/policies -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 || policies == "" {
				return badInput(errors.New("plan: -f and --policies are required (for example -f examples/manifests --policies examples/policies)"))
			}
			if output != "text" && output != "json" {
				return badInput(fmt.Errorf("plan: -o %q: want text or json", output))
			}
			o := policy.Options{Mode: policy.Mode(mode), FailureMode: policy.FailureMode(failure)}
			if err := o.Validate(); err != nil {
				return badInput(fmt.Errorf("plan: %w", err))
			}
			lookup := os.LookupEnv
			if envFile != "" {
				env, err := ciplan.ReadEnvFile(envFile)
				if err != nil {
					return badInput(fmt.Errorf("plan: %w", err))
				}
				lookup = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
			}
			cfg, err := config.Read(lookup)
			if err != nil {
				return badInput(fmt.Errorf("plan: environment: %w", err))
			}
			pfiles, err := policy.ReadDir(policies)
			if err != nil {
				return badInput(fmt.Errorf("plan: %w", err))
			}
			if decisionLog != "" {
				closeLog, err := planDecisionLog(&o, decisionLog)
				if err != nil {
					return badInput(fmt.Errorf("plan: %w", err))
				}
				defer closeLog()
			}
			engine := policy.NewEngine(o)
			if _, err := engine.Load(cmd.Context(), pfiles, policy.DirSource(policies)); err != nil {
				return badInput(fmt.Errorf("plan: %w", err))
			}
			if engine.Revision() == "" {
				return badInput(fmt.Errorf("plan: no .rego file in %s (the CCM would allow everything)", policies))
			}
			var state ciplan.State
			if statePath != "" && fromAPI {
				return badInput(errors.New("plan: --state and --from-api exclude each other: pick one source of the current state"))
			}
			prices, err := planPrices(cmd, pricesPath, fromAPI, cfg)
			if err != nil {
				return badInput(err)
			}
			if fromAPI {
				if state, err = ciplan.StateFromAPI(cmd.Context(), cfg.HCloud); err != nil {
					return badInput(err)
				}
			}
			if statePath != "" {
				if state, err = ciplan.ReadState(statePath); err != nil {
					return badInput(fmt.Errorf("plan: %w", err))
				}
			}
			m, err := ciplan.ReadManifests(files, cmd.InOrStdin())
			if err != nil {
				return badInput(fmt.Errorf("plan: %w", err))
			}
			r := ciplan.Run(cmd.Context(), m, ciplan.Options{
				Config: cfg, Decider: engine, State: state, Prices: prices,
				Cluster: input.Cluster{Name: clusterName, ClusterCIDR: clusterCIDR},
			})
			if output == "json" {
				err = r.WriteJSON(cmd.OutOrStdout())
			} else {
				err = r.WriteText(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if saveState != "" {
				if err := ciplan.WriteState(saveState, r.After(state)); err != nil {
					return badInput(fmt.Errorf("plan: %w", err))
				}
			}
			if code := r.ExitCode(); code != ciplan.ExitAllowed {
				return &exitError{code: code}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "manifest file, directory, or - for stdin (repeatable)")
	cmd.Flags().StringVar(&policies, "policies", "", "directory of policies and data files, read as --policy-dir")
	cmd.Flags().StringVar(&envFile, "env-file", "", "KEY=VALUE file with the CCM's environment (default: the process environment)")
	cmd.Flags().StringVar(&statePath, "state", "", "JSON of the current load balancers (GET /v1/load_balancers); default: none exist")
	cmd.Flags().BoolVar(&fromAPI, "from-api", false, "read the current load balancers from the Hetzner API (HCLOUD_TOKEN, read-only token enough; GET requests only)")
	cmd.Flags().StringVar(&pricesPath, "prices", "", "JSON of the load balancer prices (the body of GET /v1/load_balancer_types); --from-api reads them from the API; default: costs unknown")
	cmd.Flags().StringVar(&saveState, "save-state", "", "write the state the allowed plans would leave (same format as --state) to this file")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	cmd.Flags().StringVar(&mode, "policy-mode", "enforce", "enforce or dryrun, as the CCM's --policy-mode")
	cmd.Flags().StringVar(&failure, "policy-failure-mode", "closed", "closed or open, as the CCM's --policy-failure-mode")
	cmd.Flags().StringVar(&clusterName, "cluster-name", "kubernetes", "the CCM's --cluster-name (input.cluster.name)")
	cmd.Flags().StringVar(&clusterCIDR, "cluster-cidr", "", "the CCM's --cluster-cidr (input.cluster.cluster_cidr)")
	cmd.Flags().StringVar(&decisionLog, "decision-log", "", "append every decision as a JSON line in OPA's decision log format to this file; the output names each denied step's decision ID (replay a line with policy eval --decision-log-line)")
	return cmd
}

// planPrices are the prices of --prices, or of the API with --from-api (never both); none
// without either.
func planPrices(cmd *cobra.Command, path string, fromAPI bool, cfg config.Config) (inventory.Prices, error) {
	switch {
	case path != "" && fromAPI:
		return inventory.Prices{}, errors.New("plan: --prices and --from-api exclude each other: --from-api reads the prices from the API")
	case path != "":
		p, err := ciplan.ReadPrices(path)
		if err != nil {
			return inventory.Prices{}, fmt.Errorf("plan: %w", err)
		}
		return p, nil
	case fromAPI:
		return ciplan.PricesFromAPI(cmd.Context(), cfg.HCloud)
	}
	return inventory.Prices{}, nil
}

// planDecisionLog opens path for appending (mode 0600, as the CCM's decision log file) and sets
// o.DecisionLog to a log of every decision, labelled as the CCM labels its lines (policy_mode
// and failure_mode: `policy eval --decision-log-line` replays in them). The returned function
// closes the file.
func planDecisionLog(o *policy.Options, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--decision-log: %w", err)
	}
	l, err := policy.NewDecisionLog(policy.DecisionLogAll, f, map[string]string{
		"app": "hcloud-policy-ccm-plan", "version": ccm.Version,
		"policy_mode": string(o.Mode), "failure_mode": string(o.FailureMode),
	})
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("--decision-log: %w", err)
	}
	o.DecisionLog = l
	return func() { _ = f.Close() }, nil
}

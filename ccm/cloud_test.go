package ccm_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// env builds an environment lookup from a map.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

// baseEnv is a valid environment for the emulator at endpoint; the attached-network check asks
// the emulator's metadata service.
func baseEnv(emu *hcloudemu.Emulator, endpoint string) map[string]string {
	return map[string]string{
		"HCLOUD_TOKEN":             emu.Token(),
		"HCLOUD_ENDPOINT":          endpoint,
		"HCLOUD_METRICS_ENABLED":   "false",
		"HCLOUD_METADATA_ENDPOINT": hcloudemu.MetadataEndpoint(endpoint),
	}
}

func TestNew(t *testing.T) {
	// The CCM runs on control-plane, which is attached to k8s but not to other.
	emu, endpoint := hcloudemu.NewTestServer(t, hcloudemu.WithMetadataServer("control-plane"))
	k8s, err := emu.AddNetwork(hcloudemu.NetworkSpec{Name: "k8s", IPRange: "10.0.0.0/8",
		Subnets: []hcloudemu.SubnetSpec{{Type: "cloud", IPRange: "10.0.0.0/16", NetworkZone: "eu-central"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := emu.AddNetwork(hcloudemu.NetworkSpec{Name: "other", IPRange: "192.168.0.0/16",
		Subnets: []hcloudemu.SubnetSpec{{Type: "cloud", IPRange: "192.168.0.0/24", NetworkZone: "eu-central"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := emu.AddServer(hcloudemu.ServerSpec{Name: "control-plane", Networks: []hcloudemu.ServerNetwork{{NetworkID: k8s}}}); err != nil {
		t.Fatal(err)
	}
	badPolicy := t.TempDir()
	writeFile(t, filepath.Join(badPolicy, "bad.rego"), "package ccm\n\ndeny contains msg if {\n\tmsg := y\n}\n")

	tests := []struct {
		name       string
		env        func(map[string]string)
		opts       func(*ccm.Options)
		wantErr    []string
		wantRoutes bool
		// cidr is --cluster-cidr: "" means 10.244.0.0/16, "-" means empty, anything else is
		// passed as it is.
		cidr string
	}{
		{name: "a valid environment without a network builds a provider without routes"},
		{
			name:       "a network by name enables routes",
			env:        func(e map[string]string) { e["HCLOUD_NETWORK"] = "k8s" },
			wantRoutes: true,
		},
		{
			name: "a network without a cluster CIDR disables routes instead of failing the start",
			env:  func(e map[string]string) { e["HCLOUD_NETWORK"] = "k8s" },
			cidr: "-",
		},
		{
			name: "a dual-stack cluster CIDR disables routes, as in the official CCM, instead of failing the start",
			env:  func(e map[string]string) { e["HCLOUD_NETWORK"] = "k8s" },
			cidr: "10.244.0.0/16,fd00::/56",
		},
		{
			name: "a malformed cluster CIDR disables routes instead of failing the start",
			env:  func(e map[string]string) { e["HCLOUD_NETWORK"] = "k8s" },
			cidr: "10.244.0.0",
		},
		{
			name:       "an IPv6 cluster CIDR alone enables routes, as in the official CCM (the IPv6 routes then fail)",
			env:        func(e map[string]string) { e["HCLOUD_NETWORK"] = "k8s" },
			cidr:       "fd00::/56",
			wantRoutes: true,
		},
		{
			name: "an empty metrics address starts without the extra metrics server",
			env: func(e map[string]string) {
				e["HCLOUD_METRICS_ENABLED"] = "true"
				e["HCLOUD_METRICS_ADDRESS"] = ""
			},
		},
		{
			name: "a metrics address that cannot be listened on starts without the extra metrics server",
			env: func(e map[string]string) {
				e["HCLOUD_METRICS_ENABLED"] = "true"
				e["HCLOUD_METRICS_ADDRESS"] = "not-an-address"
			},
		},
		{
			name: "routes can be switched off",
			env: func(e map[string]string) {
				e["HCLOUD_NETWORK"] = "k8s"
				e["HCLOUD_NETWORK_ROUTES_ENABLED"] = "false"
			},
		},
		{
			name: "every env and flag problem is reported at once",
			env: func(e map[string]string) {
				e["HCLOUD_INSTANCES_ADDRESS_FAMILY"] = "ipv5"
				e["HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE"] = "random"
			},
			opts:    func(o *ccm.Options) { o.PolicyMode = "audit" },
			wantErr: []string{"HCLOUD_INSTANCES_ADDRESS_FAMILY", "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", "--policy-mode"},
		},
		{
			name:    "a missing token names the variable",
			env:     func(e map[string]string) { delete(e, "HCLOUD_TOKEN") },
			wantErr: []string{"HCLOUD_TOKEN"},
		},
		{
			name:    "a wrong token fails the startup check",
			env:     func(e map[string]string) { e["HCLOUD_TOKEN"] = "wrong" },
			wantErr: []string{"rejected the token", "HCLOUD_TOKEN", "unauthorized"},
		},
		{
			name:    "a host not attached to HCLOUD_NETWORK fails the start, naming the way out",
			env:     func(e map[string]string) { e["HCLOUD_NETWORK"] = "other" },
			wantErr: []string{`not attached to network "other"`, "HCLOUD_NETWORK", "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK=true"},
		},
		{
			name: "a host not attached to HCLOUD_NETWORK starts when the check is disabled",
			env: func(e map[string]string) {
				e["HCLOUD_NETWORK"] = "other"
				e["HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK"] = "true"
			},
			wantRoutes: true,
		},
		{
			name:    "an unknown network is named with the fix",
			env:     func(e map[string]string) { e["HCLOUD_NETWORK"] = "nope" },
			wantErr: []string{`network "nope" not found`, "HCLOUD_NETWORK"},
		},
		{
			name:    "a policy that does not compile stops the start with file and line",
			opts:    func(o *ccm.Options) { o.PolicyDir = badPolicy },
			wantErr: []string{"--policy-dir", "bad.rego", "4"},
		},
		{
			name:    "a missing plugin file is an error unless plugins are optional",
			opts:    func(o *ccm.Options) { o.NodeLabelsPlugin = filepath.Join(t.TempDir(), "missing.wasm") },
			wantErr: []string{"--plugin-node-labels", "missing.wasm", "--plugins-optional"},
		},
		{
			name: "an optional plugin that fails to load is skipped",
			opts: func(o *ccm.Options) {
				o.NodeLabelsPlugin = filepath.Join(t.TempDir(), "missing.wasm")
				o.PluginsOptional = true
			},
		},
		{
			name:    "a plugin without the configured hook is rejected",
			opts:    func(o *ccm.Options) { o.LoadBalancerNamePlugin = "../plugins/examples/wat-labels/labels.wasm" },
			wantErr: []string{"--plugin-load-balancer-name", "does not implement the load_balancer_name hook"},
		},
		{
			name: "a plugin with the configured hook loads",
			opts: func(o *ccm.Options) { o.NodeLabelsPlugin = "../plugins/examples/wat-labels/labels.wasm" },
		},
		{
			name: "the example policies load",
			opts: func(o *ccm.Options) { o.PolicyDir = "../examples/policies" },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vars := baseEnv(emu, endpoint)
			if tc.env != nil {
				tc.env(vars)
			}
			o := ccm.NewOptions()
			if tc.opts != nil {
				tc.opts(o)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cidr := tc.cidr
			switch cidr {
			case "":
				cidr = "10.244.0.0/16"
			case "-":
				cidr = ""
			}
			kube := fake.NewClientset()
			cloud, err := ccm.New(ctx, ccm.Deps{
				Options:     o,
				Env:         env(vars),
				Kube:        kube,
				Informers:   informers.NewSharedInformerFactory(kube, 0),
				Recorder:    record.NewFakeRecorder(100),
				ClusterName: "test",
				ClusterCIDR: cidr,
			})
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("New() succeeded, want an error containing %q", tc.wantErr)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("New() error = %q, want it to contain %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			if cloud.ProviderName() != "hcloud" {
				t.Errorf("ProviderName() = %q, want hcloud", cloud.ProviderName())
			}
			if _, ok := cloud.InstancesV2(); !ok {
				t.Error("InstancesV2() not supported")
			}
			if _, ok := cloud.LoadBalancer(); !ok {
				t.Error("LoadBalancer() not supported")
			}
			if _, ok := cloud.Routes(); ok != tc.wantRoutes {
				t.Errorf("Routes() supported = %v, want %v", ok, tc.wantRoutes)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestNew_loadBalancerClass: the class comes from --load-balancer-class, else
// HCLOUD_LOAD_BALANCERS_CLASS; with one the class controller runs, and with
// --load-balancer-class-only the upstream service controller is off; a bad flag and
// class-only without a class stop the start naming the flag (issue 43).
func TestNew_loadBalancerClass(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t)
	tests := []struct {
		name        string
		flag, env   string
		only        bool
		lbsDisabled bool
		wantErr     string
		wantRuns    bool
		wantOff     bool
	}{
		{name: "no class: no controller, the service controller runs"},
		{name: "the flag", flag: "example.com/hetzner", wantRuns: true},
		{name: "the variable", env: "example.com/hetzner", wantRuns: true},
		{name: "class-only", flag: "hetzner", only: true, wantRuns: true, wantOff: true},
		{name: "load balancers disabled: no controller", flag: "hetzner", lbsDisabled: true},
		{name: "a bad flag stops the start", flag: "not valid", wantErr: `invalid value for --load-balancer-class: "not valid"`},
		{name: "class-only without a class stops the start", only: true, wantErr: "--load-balancer-class-only is set without a class"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vars := baseEnv(emu, endpoint)
			if tc.env != "" {
				vars["HCLOUD_LOAD_BALANCERS_CLASS"] = tc.env
			}
			if tc.lbsDisabled {
				vars["HCLOUD_LOAD_BALANCERS_ENABLED"] = "false"
			}
			o := ccm.NewOptions()
			o.LoadBalancerClass, o.LoadBalancerClassOnly = tc.flag, tc.only
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			kube := fake.NewClientset()
			cloud, err := ccm.New(ctx, ccm.Deps{
				Options: o, Env: env(vars), Kube: kube, Informers: informers.NewSharedInformerFactory(kube, 0),
				Recorder: record.NewFakeRecorder(100), ClusterName: "test",
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New() = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			if got := cloud.RunLoadBalancerClass(ctx, 1); got != tc.wantRuns {
				t.Errorf("RunLoadBalancerClass() = %v, want %v", got, tc.wantRuns)
			}
			if got := cloud.ServiceControllerOff(); got != tc.wantOff {
				t.Errorf("ServiceControllerOff() = %v, want %v", got, tc.wantOff)
			}
		})
	}
}

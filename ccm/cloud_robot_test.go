package ccm_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/robotemu"
)

// TestNew_robot starts the provider with the official CCM's Robot variables and asks it for
// a Robot node's metadata.
func TestNew_robot(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t)
	robotEmu, robotEndpoint := robotemu.NewTestServer(t, robotemu.Seed{Servers: []robotemu.Server{
		{Number: 321, Name: "bm-1", IP: "203.0.113.5", Product: "AX41-NVMe", DC: "FSN1-DC16"},
	}})
	bm := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bm-1"}}
	tests := []struct {
		name         string
		env          map[string]string
		wantErr      []string
		wantProvider string
		wantMetaErr  string
	}{
		{
			name: "ROBOT_ENABLED with credentials serves Robot nodes",
			env: map[string]string{"ROBOT_ENABLED": "true", "ROBOT_USER": robotEmu.User(), "ROBOT_PASSWORD": robotEmu.Password(),
				"ROBOT_ENDPOINT": robotEndpoint},
			wantProvider: "hrobot://321",
		},
		{
			name:        "ROBOT_ENABLED without credentials starts, but finds no Robot server by name",
			env:         map[string]string{"ROBOT_ENABLED": "true", "ROBOT_ENDPOINT": robotEndpoint},
			wantMetaErr: "instance not found",
		},
		{
			name:    "a user without password stops the start naming ROBOT_PASSWORD, not the user's value",
			env:     map[string]string{"ROBOT_ENABLED": "true", "ROBOT_USER": "secret-user-name"},
			wantErr: []string{`"ROBOT_PASSWORD" is required when "ROBOT_USER" is set`},
		},
		{
			name:         "Robot settings are ignored while ROBOT_ENABLED is unset",
			env:          map[string]string{"ROBOT_USER": "u"},
			wantMetaErr:  "instance not found",
			wantProvider: "",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vars := baseEnv(emu, endpoint)
			for k, v := range tc.env {
				vars[k] = v
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			kube := fake.NewClientset()
			cloud, err := ccm.New(ctx, ccm.Deps{Options: ccm.NewOptions(), Env: env(vars), Kube: kube,
				Informers: informers.NewSharedInformerFactory(kube, 0), Recorder: record.NewFakeRecorder(100), ClusterName: "test"})
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("New() succeeded, want an error containing %q", tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("New() error = %q, want it to contain %q", err, w)
					}
				}
				if strings.Contains(err.Error(), "secret-user-name") {
					t.Errorf("New() error %q contains a credential", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			iv2, _ := cloud.InstancesV2()
			md, err := iv2.InstanceMetadata(ctx, bm)
			if tc.wantMetaErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantMetaErr) {
					t.Fatalf("InstanceMetadata() error = %v, want %q", err, tc.wantMetaErr)
				}
				return
			}
			if err != nil || md.ProviderID != tc.wantProvider || md.AdditionalLabels["instance.hetzner.cloud/provided-by"] != "robot" {
				t.Fatalf("InstanceMetadata() = %+v, %v; want provider ID %s and provided-by=robot", md, err, tc.wantProvider)
			}
		})
	}
}

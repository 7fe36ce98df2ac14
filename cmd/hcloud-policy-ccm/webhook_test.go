package main

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	cloudconfig "k8s.io/cloud-provider/app/config"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/admission"
)

// TestServeWebhook: the webhook is off unless --webhooks names it; named without the feature
// gate CloudControllerManagerWebhook, start-up fails with the flag to add.
func TestServeWebhook(t *testing.T) {
	registerWebhook()
	registerWebhook() // idempotent: newCommand may run more than once
	for _, tc := range []struct {
		webhooks []string
		wantErr  string
	}{
		{webhooks: nil},
		{webhooks: []string{"*"}}, // disabled by default: "*" does not enable it
		{webhooks: []string{"-" + admission.Name}},
		{webhooks: []string{admission.Name}, wantErr: "--feature-gates=CloudControllerManagerWebhook=true"},
	} {
		c := &cloudconfig.Config{LoopbackClientConfig: &rest.Config{}}
		c.ComponentConfig.Webhook.Webhooks = tc.webhooks
		err := serveWebhook(c.Complete(), nil, &webhookOptions{}, wait.NeverStop)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("--webhooks=%v: %v, want nil (not served)", tc.webhooks, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("--webhooks=%v: %v, want an error naming %s", tc.webhooks, err, tc.wantErr)
		}
	}
}

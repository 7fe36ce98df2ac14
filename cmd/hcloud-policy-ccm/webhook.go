package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apiserver/pkg/server/mux"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/cloud-provider/app"
	cloudconfig "k8s.io/cloud-provider/app/config"
	controllermanagerapp "k8s.io/controller-manager/app"
	cmfeatures "k8s.io/controller-manager/pkg/features"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/admission"
)

// The admission webhook (ccm/admission) is served by k8s.io/cloud-provider's webhook server:
// its flags (--webhooks, --webhook-secure-port, --webhook-bind-address, --webhook-cert-dir,
// --webhook-tls-cert-file, --webhook-tls-private-key-file, ...), its TLS serving
// (c.WebhookSecureServing), its handler type (app.WebhookHandler: decoding the
// AdmissionReview, the cloudprovider_webhook_* metrics) and its feature gate
// CloudControllerManagerWebhook. It is disabled by default: --webhooks must name it.
//
// # Why not app.CommandBuilder.RegisterWebhook?
//
// The builder would serve it by itself, but its BuildCommand (v0.37) leaves out what
// app.NewCloudControllerManagerCommand, our command today, has: the logging configuration
// flags (--logging-format, --log-json-*, --log-text-*) and their application at start. So the
// command stays, the webhook is made known to it through app.AllWebhooks (so --webhooks
// accepts the name), and serveWebhook starts the same server Run would start, from the
// completed configuration, with the upstream handler type.

// webhookOptions are the flags of the admission webhook that the upstream server has not.
type webhookOptions struct {
	exemptUsers []string
	timeout     time.Duration
}

func (o *webhookOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.exemptUsers, "admission-exempt-users", o.exemptUsers,
		"Usernames whose Service writes the "+admission.Name+" webhook admits without a plan: the CCM's own service account "+
			"(e.g. system:serviceaccount:kube-system:hcloud-cloud-controller-manager). Status writes and updates that only set the CCM's retry annotation are never reviewed anyway.")
	fs.DurationVar(&o.timeout, "admission-timeout", admission.DefaultTimeout,
		"How long the "+admission.Name+" webhook may plan and decide one request before it admits it with a warning; keep it below the timeoutSeconds of the ValidatingWebhookConfiguration.")
}

// registerWebhook makes the admission webhook known to the upstream command: --webhooks
// accepts its name and lists it, disabled by default. It must run before the command is built.
func registerWebhook() {
	if slices.Contains(app.AllWebhooks, admission.Name) {
		return // newCommand ran before
	}
	app.AllWebhooks = append(app.AllWebhooks, admission.Name)
	app.DisabledByDefaultWebhooks = append(app.DisabledByDefaultWebhooks, admission.Name)
	app.WebhooksDisabledByDefault.Insert(admission.Name)
}

// serveWebhook starts the admission webhook when --webhooks enables it and
// --webhook-secure-port is not 0, as the upstream Run does for registered webhooks.
//
// # Errors
//
// The webhook enabled without the feature gate CloudControllerManagerWebhook, or a server
// that does not start.
func serveWebhook(c *cloudconfig.CompletedConfig, cloud *ccm.Cloud, o *webhookOptions, stopCh <-chan struct{}) error {
	if !controllermanagerapp.IsControllerEnabled(admission.Name, app.WebhooksDisabledByDefault, c.ComponentConfig.Webhook.Webhooks) {
		return nil // not named in --webhooks (upstream's NewWebhookHandlers would log a warning)
	}
	if !utilfeature.DefaultFeatureGate.Enabled(cmfeatures.CloudControllerManagerWebhook) {
		return fmt.Errorf("--webhooks=%s needs --feature-gates=%s=true (the webhook server of k8s.io/cloud-provider is behind it)", admission.Name, cmfeatures.CloudControllerManagerWebhook)
	}
	if c.WebhookSecureServing == nil {
		klog.InfoS("Admission webhook enabled but not served: --webhook-secure-port is 0", "webhook", admission.Name)
		return nil
	}
	cfg, ok := cloud.AdmissionConfig()
	if !ok {
		klog.InfoS("Admission webhook not served: load balancers are disabled (HCLOUD_LOAD_BALANCERS_ENABLED=false)", "webhook", admission.Name)
		return nil
	}
	cfg.ExemptUsers, cfg.Timeout = o.exemptUsers, o.timeout
	h, err := admission.New(cfg)
	if err != nil {
		return fmt.Errorf("admission webhook: %w", err)
	}
	// The controller manager starts the informers once this replica leads; every replica
	// behind the webhook's Service answers, so start the ones registered so far (nodes and
	// namespaces, which the webhook reads) now. Start is idempotent: the controller manager's
	// later call starts only the informers added since. One side effect, logged once by
	// client-go ("resync period is smaller than resync check period"): the service
	// controller's node handler, added after this start, keeps the factory's resync instead of
	// its 100 s; that resync is a no-op there (its UpdateFunc ignores an unchanged node,
	// shouldSyncUpdatedNode), so the service controller behaves the same.
	c.SharedInformers.Start(stopCh)
	handlers := app.NewWebhookHandlers(map[string]app.WebhookConfig{
		admission.Name: {Path: admission.Path, AdmissionHandler: h.AdmissionHandler},
	}, c, cloud)
	m := mux.NewPathRecorderMux("hcloud-policy-ccm-webhook")
	for _, wh := range handlers {
		m.Handle(wh.Path, wh)
	}
	if _, _, err := c.WebhookSecureServing.Serve(m, 0, stopCh); err != nil {
		return fmt.Errorf("admission webhook: serve: %w", err)
	}
	klog.InfoS("Admission webhook serving", "webhook", admission.Name, "path", admission.Path, "address", c.WebhookSecureServing.Listener.Addr().String())
	return nil
}
